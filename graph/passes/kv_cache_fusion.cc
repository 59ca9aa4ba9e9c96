// Stacked KV cache: past_kv [N, ...] -> Gather(i) -> Concat(new_i, seq axis) -> Unsqueeze(0)
// -> Concat(axis 0) = present_kv. Run as written, every step copies the whole cache three
// times. Rewritten, the first append allocates present_kv once, each layer's append writes
// its own slot (past rows, then new rows) and hands the layer a view of that slot, and the
// final node returns the buffer itself: one copy of the cache per step.
#include <map>

#include "absl/strings/str_cat.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

struct Uses {
  std::map<std::string, std::vector<size_t>> readers;  // value -> node indices
  bool OnlyReadBy(const std::string& v, size_t node) const {
    auto it = readers.find(v);
    return it != readers.end() && it->second.size() == 1 && it->second[0] == node;
  }
};

const Tensor* Const(const Graph& g, const std::string& name) {
  auto it = g.initializers.find(name);
  return it == g.initializers.end() ? nullptr : &it->second;
}

bool ScalarInt(const Graph& g, const std::string& name, int64_t* v) {
  const Tensor* t = Const(g, name);
  if (t == nullptr || t->num_elements() != 1) return false;
  if (t->dtype() == DType::kInt64) *v = t->data<int64_t>()[0];
  else if (t->dtype() == DType::kInt32) *v = t->data<int32_t>()[0];
  else return false;
  return true;
}

}  // namespace

int FuseStackedKVCache(Graph& g) {
  int fused = 0;
  for (const ValueInfo& in : g.inputs) {
    const TypeInfo& type = in.type;
    if (type.kind != TypeInfo::Kind::kTensor || !type.shape || type.shape->size() < 3) continue;
    const int64_t rank = static_cast<int64_t>(type.shape->size());
    Uses uses;
    for (size_t k = 0; k < g.nodes.size(); ++k) {
      for (const std::string& v : g.nodes[k].inputs) if (!v.empty()) uses.readers[v].push_back(k);
      for (const std::string& v : g.nodes[k].implicit_inputs) uses.readers[v].push_back(k);
    }
    auto it = uses.readers.find(in.name);
    if (it == uses.readers.end()) continue;
    // Every reader of the input must be a Gather of one constant slot along axis 0 (or a Shape).
    std::map<int64_t, size_t> gather_of_slot;
    bool ok = true;
    for (size_t k : it->second) {
      const Node& n = g.nodes[k];
      if (n.op_type == "Shape" && n.domain.empty()) continue;  // reads the shape only
      int64_t slot = 0;
      if (n.op_type != "Gather" || !n.domain.empty() || n.inputs.size() != 2 || n.inputs[0] != in.name ||
          n.GetInt("axis", 0) != 0 || !ScalarInt(g, n.inputs[1], &slot) || gather_of_slot.count(slot)) {
        ok = false;
        break;
      }
      gather_of_slot[slot] = k;
    }
    const int64_t slots = static_cast<int64_t>(gather_of_slot.size());
    if (!ok || slots == 0 || gather_of_slot.begin()->first != 0 || gather_of_slot.rbegin()->first != slots - 1) continue;
    if ((*type.shape)[0].is_fixed() && (*type.shape)[0].value != slots) continue;
    // Each gathered slot feeds exactly one Concat(slot, new) along the sequence axis, whose
    // result is read by an Unsqueeze(axis 0) among others; all Unsqueezes meet in one Concat.
    struct Chain { size_t gather, concat, unsqueeze; };
    std::vector<Chain> chains;
    int64_t seq_axis = -1;
    std::string final_concat_out;
    size_t final_concat = 0;
    for (const auto& [slot, gk] : gather_of_slot) {
      const std::string& gout = g.nodes[gk].outputs[0];
      auto r = uses.readers.find(gout);
      if (r == uses.readers.end() || r->second.size() != 1) { ok = false; break; }
      const size_t ck = r->second[0];
      const Node& c = g.nodes[ck];
      if (c.op_type != "Concat" || !c.domain.empty() || c.inputs.size() != 2 || c.inputs[0] != gout) { ok = false; break; }
      int64_t axis = c.GetInt("axis", 0);
      if (axis < 0) axis += rank - 1;
      if (axis <= 0 || axis >= rank - 1 || (seq_axis >= 0 && axis != seq_axis)) { ok = false; break; }
      seq_axis = axis;
      size_t uk = SIZE_MAX;
      for (size_t reader : uses.readers[c.outputs[0]]) {
        const Node& u = g.nodes[reader];
        if (u.op_type == "Unsqueeze" && u.domain.empty()) {
          std::vector<int64_t> axes = u.GetInts("axes");
          if (axes.empty() && u.inputs.size() > 1) {
            const Tensor* t = Const(g, u.inputs[1]);
            if (t && t->dtype() == DType::kInt64) axes.assign(t->data<int64_t>(), t->data<int64_t>() + t->num_elements());
          }
          if (axes == std::vector<int64_t>{0}) uk = reader;
        }
      }
      if (uk == SIZE_MAX) { ok = false; break; }
      auto ur = uses.readers.find(g.nodes[uk].outputs[0]);
      if (ur == uses.readers.end() || ur->second.size() != 1) { ok = false; break; }
      const Node& fc = g.nodes[ur->second[0]];
      if (fc.op_type != "Concat" || !fc.domain.empty() || fc.GetInt("axis", 0) != 0 ||
          static_cast<int64_t>(fc.inputs.size()) != slots || fc.inputs[static_cast<size_t>(slot)] != g.nodes[uk].outputs[0] ||
          (final_concat_out.size() && fc.outputs[0] != final_concat_out)) {
        ok = false;
        break;
      }
      final_concat_out = fc.outputs[0];
      final_concat = ur->second[0];
      chains.push_back({gk, ck, uk});
    }
    if (!ok || chains.size() != static_cast<size_t>(slots)) continue;

    // Rewrite: the Gathers become appends, the Concats go, the final Concat becomes the finish.
    const std::string buffer = absl::StrCat(in.name, "__present_buffer");
    std::vector<std::string> slot_views;
    for (int64_t s = 0; s < slots; ++s) {
      const Chain& ch = chains[static_cast<size_t>(s)];
      Node& gather = g.nodes[ch.gather];
      const Node& concat = g.nodes[ch.concat];
      Node append;
      append.op_type = "KVCacheAppend";
      append.domain = "oneinfer.internal";
      append.name = absl::StrCat(in.name, "_append_", s);
      append.inputs = {in.name, concat.inputs[1]};
      if (s > 0) append.inputs.push_back(buffer);
      append.outputs = {concat.outputs[0]};
      if (s == 0) append.outputs.push_back(buffer);
      Attribute a;
      a.name = "slot";
      a.type = Attribute::Type::kInt;
      a.i = s;
      append.attrs["slot"] = a;
      a.name = "axis";
      a.i = seq_axis;
      append.attrs["axis"] = a;
      gather = std::move(append);
      slot_views.push_back(concat.outputs[0]);
    }
    Node finish;
    finish.op_type = "KVCacheFinish";
    finish.domain = "oneinfer.internal";
    finish.name = absl::StrCat(in.name, "_finish");
    finish.inputs = {buffer};
    finish.inputs.insert(finish.inputs.end(), slot_views.begin(), slot_views.end());
    finish.outputs = {final_concat_out};
    g.nodes[final_concat] = std::move(finish);
    std::vector<bool> drop(g.nodes.size(), false);
    for (const Chain& ch : chains) {
      drop[ch.concat] = true;
      // The Unsqueeze is dead now unless something else reads it.
    }
    EraseFusedNodes(g, drop);
    ++fused;
  }
  return fused;
}

}  // namespace oneinfer
