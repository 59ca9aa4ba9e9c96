// The use-def index the graph passes share: who produces each value, who reads it, which
// names are graph inputs and outputs, and the one meaning of "constant".
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace oneinfer {

// n is the ai.onnx operator `op` (the loader writes ai.onnx's domain as "").
inline bool IsOnnxOp(const Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }

class UseDefIndex {
 public:
  // One read of a value: node `node` reads it in input slot `slot`, or through its subgraphs
  // (slot kImplicit; once per name in Node::implicit_inputs).
  struct Use {
    size_t node;
    int slot;
    bool operator==(const Use&) const = default;
  };
  static constexpr int kImplicit = -1;

  explicit UseDefIndex(const Graph& g) : g_(&g) { Rebuild(); }
  // Describes the graph again after a pass changed its nodes, inputs or outputs.
  void Rebuild();

  const Graph& graph() const { return *g_; }
  // The index of the node producing `v`, or -1 (a graph input, an initializer, an outer value).
  long ProducerIndex(const std::string& v) const;
  // The node producing `v`, or null.
  const Node* Producer(const std::string& v) const;
  // The ai.onnx `op` node producing `v` when a fusion may take it into a chain: `v` has one
  // reader and is not a graph output; null otherwise.
  const Node* SoleUseProducer(const std::string& v, const char* op) const;
  // Every read of `v` by a node, in node order (input slots, then subgraph reads); graph
  // outputs are not in it (IsGraphOutput).
  const std::vector<Use>& Readers(const std::string& v) const;
  bool IsGraphInput(const std::string& v) const { return graph_inputs_.count(v) != 0; }
  bool IsGraphOutput(const std::string& v) const { return graph_outputs_.count(v) != 0; }
  // An initializer that is also a graph input: a feed can replace it, so it is not constant.
  bool IsOverridable(const std::string& v) const { return IsGraphInput(v) && g_->IsInitializer(v); }

  // The constant value of `v`: an initializer that is not also a graph input, or the output of
  // a Constant node holding a tensor `value`; null otherwise. Initializers are looked up live,
  // so values a pass folds into initializers are constants at once.
  const Tensor* Const(const std::string& v) const;
  // The value of a one-element int64 or int32 constant `v` into *out; false when `v` is not one.
  bool ConstInt(const std::string& v, int64_t* out) const;

  // Same producers, readers, graph inputs and outputs (tests: a kept index matches a fresh one).
  bool operator==(const UseDefIndex& o) const {
    return producer_ == o.producer_ && readers_ == o.readers_ && graph_inputs_ == o.graph_inputs_ &&
           graph_outputs_ == o.graph_outputs_;
  }

 private:
  const Graph* g_;
  std::map<std::string, size_t> producer_;
  std::map<std::string, std::vector<Use>> readers_;
  std::set<std::string> graph_inputs_;
  std::set<std::string> graph_outputs_;
};

}  // namespace oneinfer
