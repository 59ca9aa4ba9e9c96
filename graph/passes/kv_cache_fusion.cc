// Stacked KV cache: past_kv [N, ...] -> Gather(i) -> Concat(new_i, seq axis) -> Unsqueeze(0)
// -> Concat(axis 0) = present_kv. Run as written, every step copies the whole cache three
// times. Rewritten, the first append allocates present_kv once, each layer's append writes
// its own slot (past rows, then new rows) and hands the layer a view of that slot, and the
// final node returns the buffer itself: one copy of the cache per step.
// Per-layer caches (past_key_values.{i}.* -> Concat -> present.{i}.*, the optimum layout) become
// KVCacheConcat: the same copy into a block with room to grow, so that the pool serves the next
// steps' caches (a new size class every few positions cost fresh page faults: ~40 ms a step).
#include <cstdint>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "graph/internal_ops.h"
#include "graph/passes/passes.h"

namespace oneinfer {

int FuseStackedKVCache(Graph& g, UseDefIndex& uses) {
  using Append = internal_ops::KVCacheAppend;
  using Finish = internal_ops::KVCacheFinish;
  // Node indices reading v (one per input slot or subgraph read), in node order.
  auto readers = [&](const std::string& v) {
    std::vector<size_t> r;
    for (const UseDefIndex::Use& u : uses.Readers(v)) r.push_back(u.node);
    return r;
  };
  int fused = 0;
  for (const ValueInfo& in : g.inputs) {
    const TypeInfo& type = in.type;
    if (type.kind != TypeInfo::Kind::kTensor || !type.shape || type.shape->size() < 3) continue;
    const int64_t rank = static_cast<int64_t>(type.shape->size());
    const std::vector<size_t> in_readers = readers(in.name);
    if (in_readers.empty()) continue;
    // Every reader of the input must be a Gather of one constant slot along axis 0 (or a Shape).
    std::map<int64_t, size_t> gather_of_slot;
    bool ok = true;
    for (size_t k : in_readers) {
      const Node& n = g.nodes[k];
      if (n.op_type == "Shape" && n.domain.empty()) continue;  // reads the shape only
      int64_t slot = 0;
      if (n.op_type != "Gather" || !n.domain.empty() || n.inputs.size() != 2 || n.inputs[0] != in.name ||
          n.GetInt("axis", 0) != 0 || !uses.ConstInt(n.inputs[1], &slot) || gather_of_slot.count(slot)) {
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
      const std::vector<size_t> r = readers(gout);
      if (r.size() != 1) { ok = false; break; }
      const size_t ck = r[0];
      const Node& c = g.nodes[ck];
      if (c.op_type != "Concat" || !c.domain.empty() || c.inputs.size() != 2 || c.inputs[0] != gout) { ok = false; break; }
      int64_t axis = c.GetInt("axis", 0);
      if (axis < 0) axis += rank - 1;
      if (axis <= 0 || axis >= rank - 1 || (seq_axis >= 0 && axis != seq_axis)) { ok = false; break; }
      seq_axis = axis;
      size_t uk = SIZE_MAX;
      for (size_t reader : readers(c.outputs[0])) {
        const Node& u = g.nodes[reader];
        if (u.op_type == "Unsqueeze" && u.domain.empty()) {
          std::vector<int64_t> axes = u.GetInts("axes");
          if (axes.empty() && u.inputs.size() > 1) {
            const Tensor* t = uses.Const(u.inputs[1]);
            if (t && t->dtype() == DType::kInt64) axes.assign(t->data<int64_t>(), t->data<int64_t>() + t->num_elements());
          }
          if (axes == std::vector<int64_t>{0}) uk = reader;
        }
      }
      if (uk == SIZE_MAX) { ok = false; break; }
      const std::vector<size_t> ur = readers(g.nodes[uk].outputs[0]);
      if (ur.size() != 1) { ok = false; break; }
      const Node& fc = g.nodes[ur[0]];
      if (fc.op_type != "Concat" || !fc.domain.empty() || fc.GetInt("axis", 0) != 0 ||
          static_cast<int64_t>(fc.inputs.size()) != slots || fc.inputs[static_cast<size_t>(slot)] != g.nodes[uk].outputs[0] ||
          (final_concat_out.size() && fc.outputs[0] != final_concat_out)) {
        ok = false;
        break;
      }
      final_concat_out = fc.outputs[0];
      final_concat = ur[0];
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
      append.op_type = Append::kName;
      append.domain = internal_ops::kDomain;
      append.name = absl::StrCat(in.name, "_append_", s);
      append.inputs = {in.name, concat.inputs[1]};  // kPast, kNew
      if (s > 0) append.inputs.push_back(buffer);   // kBuffer
      append.outputs = {concat.outputs[0]};          // kSlotView
      if (s == 0) append.outputs.push_back(buffer);  // kBufferOut
      append.attrs[Append::kSlot] = Attribute::Int(Append::kSlot, s);
      append.attrs[Append::kAxis] = Attribute::Int(Append::kAxis, seq_axis);
      gather = std::move(append);
      slot_views.push_back(concat.outputs[0]);
    }
    Node finish;
    finish.op_type = Finish::kName;
    finish.domain = internal_ops::kDomain;
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
    EraseFusedNodes(g, drop, uses);
    ++fused;
  }
  return fused;
}

int FusePerLayerKVCache(Graph& g, UseDefIndex& uses) {
  std::map<std::string, int64_t> input_rank;  // graph inputs (not initializers) of known rank
  for (const ValueInfo& in : g.inputs) {
    if (in.type.kind == TypeInfo::Kind::kTensor && in.type.shape && uses.Const(in.name) == nullptr) {
      input_rank[in.name] = static_cast<int64_t>(in.type.shape->size());
    }
  }
  std::set<std::string> outputs;
  for (const ValueInfo& out : g.outputs) outputs.insert(out.name);
  int fused = 0;
  for (Node& n : g.nodes) {
    if (n.op_type != "Concat" || !n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1 ||
        !n.HasAttr("axis") || !outputs.count(n.outputs[0])) {
      continue;
    }
    // [batch, heads, positions, head size], joined along the positions.
    auto past = input_rank.find(n.inputs[0]);
    if (past == input_rank.end() || past->second != 4) continue;
    int64_t axis = n.GetInt("axis", 0);
    if (axis < 0) axis += past->second;
    if (axis != 2) continue;
    Node grow;
    grow.op_type = internal_ops::KVCacheConcat::kName;
    grow.domain = internal_ops::kDomain;
    grow.name = n.name;
    grow.inputs = n.inputs;
    grow.outputs = n.outputs;
    grow.attrs[internal_ops::KVCacheConcat::kAxis] = Attribute::Int(internal_ops::KVCacheConcat::kAxis, axis);
    n = std::move(grow);
    ++fused;
  }
  if (fused > 0) EraseFusedNodes(g, std::vector<bool>(g.nodes.size(), false), uses);
  return fused;
}

int MarkGrowableKVCache(Graph& g, UseDefIndex& uses) {
  using Append = internal_ops::KVCacheAppend;
  using Finish = internal_ops::KVCacheFinish;
  using Att = internal_ops::SoftmaxAttention;
  std::map<std::string, std::vector<size_t>> appends_of;  // buffer -> its appends
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (n.domain != internal_ops::kDomain || n.op_type != Append::kName) continue;
    const bool first = n.outputs.size() > Append::kBufferOut;
    if (!first && n.inputs.size() <= Append::kBuffer) continue;
    appends_of[first ? n.outputs[Append::kBufferOut] : n.inputs[Append::kBuffer]].push_back(k);
  }
  // Node u.node is an internal `op` reading the value in input slot `lo` or above, up to `hi`.
  auto reads_as = [&](const UseDefIndex::Use& u, const char* op, int lo, int hi) {
    const Node& r = g.nodes[u.node];
    return r.domain == internal_ops::kDomain && r.op_type == op && u.slot >= lo && u.slot <= hi;
  };
  int marked = 0;
  for (const auto& [buffer, appends] : appends_of) {
    // The buffer goes to the other appends and the finish, the finish's output to the caller alone.
    bool ok = !uses.IsGraphOutput(buffer);
    for (const UseDefIndex::Use& u : uses.Readers(buffer)) {
      if (reads_as(u, Append::kName, Append::kBuffer, Append::kBuffer)) continue;
      const std::string& present = g.nodes[u.node].outputs[0];
      ok = ok && reads_as(u, Finish::kName, Finish::kBuffer, Finish::kBuffer) && uses.Readers(present).empty() &&
           uses.IsGraphOutput(present);
    }
    // The past, fed back strided, is read by the appends for its data and by nothing else but
    // shape queries (a Shape reads no data).
    const std::string& past = g.nodes[appends.front()].inputs[Append::kPast];
    ok = ok && uses.IsGraphInput(past) && !uses.IsGraphOutput(past) && !g.IsInitializer(past);
    for (const UseDefIndex::Use& u : uses.Readers(past)) {
      const Node& r = g.nodes[u.node];
      ok = ok && (reads_as(u, Append::kName, Append::kPast, Append::kPast) ||
                  (IsDefaultDomain(r.domain) && r.op_type == "Shape"));
    }
    // Each slot view: its rows at a stride SoftmaxAttention reads (the sequence axis is the
    // slot's second-to-last), read by SoftmaxAttention's k or v and the finish alone.
    for (size_t k : appends) {
      const Node& n = g.nodes[k];
      const std::string& view = n.outputs[Append::kSlotView];
      const TypeInfo* t = g.FindType(view);
      ok = ok && n.inputs[Append::kPast] == past && t != nullptr && t->shape &&
           n.GetInt(Append::kAxis, 1) + 2 == static_cast<int64_t>(t->shape->size()) && !uses.IsGraphOutput(view);
      for (const UseDefIndex::Use& u : uses.Readers(view)) {
        ok = ok && (reads_as(u, Att::kName, Att::kK, Att::kV) || reads_as(u, Finish::kName, 1, INT32_MAX));
      }
    }
    if (!ok) continue;
    for (size_t k : appends) g.nodes[k].attrs[Append::kGrow] = Attribute::Int(Append::kGrow, 1);
    ++marked;
  }
  // Per-layer caches (KVCacheConcat): the same conditions on one past and its present, which
  // goes to the caller and to SoftmaxAttention's k or v alone.
  using Concat = internal_ops::KVCacheConcat;
  for (Node& n : g.nodes) {
    if (n.domain != internal_ops::kDomain || n.op_type != Concat::kName || n.inputs.size() != 2 || n.outputs.size() != 1) continue;
    const std::string& past = n.inputs[Concat::kPast];
    const std::string& present = n.outputs[0];
    const TypeInfo* t = g.FindType(present);
    bool ok = t != nullptr && t->shape && n.GetInt(Concat::kAxis, 0) + 2 == static_cast<int64_t>(t->shape->size()) &&
              uses.IsGraphOutput(present) && uses.IsGraphInput(past) && !uses.IsGraphOutput(past) && !g.IsInitializer(past);
    for (const UseDefIndex::Use& u : uses.Readers(past)) {
      const Node& r = g.nodes[u.node];
      ok = ok && ((&r == &n && u.slot == static_cast<int>(Concat::kPast)) || (IsDefaultDomain(r.domain) && r.op_type == "Shape"));
    }
    for (const UseDefIndex::Use& u : uses.Readers(present)) ok = ok && reads_as(u, Att::kName, Att::kK, Att::kV);
    if (!ok) continue;
    n.attrs[Concat::kGrow] = Attribute::Int(Concat::kGrow, 1);
    ++marked;
  }
  return marked;
}

namespace {

class KVCacheInPlacePass : public GraphPass {
 public:
  const char* name() const override { return "kv_cache_in_place"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext&) const override {
    return MarkGrowableKVCache(g, uses);
  }
};

class KVCacheFusionPass : public GraphPass {
 public:
  const char* name() const override { return "kv_cache_fusion"; }
  absl::StatusOr<int> Apply(Graph& g, UseDefIndex& uses, const PassContext&) const override {
    const int per_layer = FusePerLayerKVCache(g, uses);
    const int fused = FuseStackedKVCache(g, uses);
    if (fused == 0) return per_layer;
    // Appends after the first read the buffer the first makes, which may come later in node order.
    if (absl::Status st = SortTopologically(g, {}); !st.ok()) return st;
    uses.Rebuild();
    return per_layer + fused;
  }
};

}  // namespace

std::unique_ptr<GraphPass> MakeKVCacheFusionPass() { return std::make_unique<KVCacheFusionPass>(); }
std::unique_ptr<GraphPass> MakeKVCacheInPlacePass() { return std::make_unique<KVCacheInPlacePass>(); }

}  // namespace oneinfer
