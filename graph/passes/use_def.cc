#include "graph/passes/use_def.h"

namespace oneinfer {

void UseDefIndex::Rebuild() {
  producer_.clear();
  readers_.clear();
  graph_inputs_.clear();
  graph_outputs_.clear();
  const Graph& g = *g_;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    for (const std::string& o : n.outputs) if (!o.empty()) producer_[o] = k;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!n.inputs[i].empty()) readers_[n.inputs[i]].push_back(Use{k, static_cast<int>(i)});
    }
    for (const std::string& i : n.implicit_inputs) readers_[i].push_back(Use{k, kImplicit});
  }
  for (const ValueInfo& v : g.inputs) graph_inputs_.insert(v.name);
  for (const ValueInfo& v : g.outputs) graph_outputs_.insert(v.name);
}

long UseDefIndex::ProducerIndex(const std::string& v) const {
  auto it = producer_.find(v);
  return it == producer_.end() ? -1 : static_cast<long>(it->second);
}

const Node* UseDefIndex::Producer(const std::string& v) const {
  const long k = ProducerIndex(v);
  return k < 0 ? nullptr : &g_->nodes[static_cast<size_t>(k)];
}

const Node* UseDefIndex::SoleUseProducer(const std::string& v, const char* op) const {
  const Node* p = Producer(v);
  return p != nullptr && Readers(v).size() == 1 && !IsGraphOutput(v) && IsOnnxOp(*p, op) ? p : nullptr;
}

const std::vector<UseDefIndex::Use>& UseDefIndex::Readers(const std::string& v) const {
  static const std::vector<Use> kNone;
  auto it = readers_.find(v);
  return it == readers_.end() ? kNone : it->second;
}

const Tensor* UseDefIndex::Const(const std::string& v) const {
  if (v.empty() || IsGraphInput(v)) return nullptr;
  auto it = g_->initializers.find(v);
  if (it != g_->initializers.end()) return &it->second;
  const Node* p = Producer(v);
  if (p == nullptr || p->op_type != "Constant" || !p->domain.empty()) return nullptr;
  const Attribute* a = p->FindAttr("value");
  return a != nullptr && a->type == Attribute::Type::kTensor ? &a->t : nullptr;
}

bool UseDefIndex::ConstInt(const std::string& v, int64_t* out) const {
  const Tensor* t = Const(v);
  if (t == nullptr || t->num_elements() != 1) return false;
  if (t->dtype() == DType::kInt64) *out = t->data<int64_t>()[0];
  else if (t->dtype() == DType::kInt32) *out = t->data<int32_t>()[0];
  else return false;
  return true;
}

}  // namespace oneinfer
