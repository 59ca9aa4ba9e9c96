#include "engine/plan.h"

#include <map>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "graph/passes/passes.h"

namespace oneinfer {

namespace {

absl::Status WithNode(const absl::Status& s, const Node& n) {
  if (s.ok()) return s;
  const std::string who = n.Describe();
  if (absl::StrContains(s.message(), who)) return s;
  return absl::Status(s.code(), absl::StrCat(who, ": ", s.message()));
}

std::string KindName(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kNone: return "an empty optional";
    case Value::Kind::kSequence: return "a sequence";
    case Value::Kind::kTensor: return "a tensor";
  }
  return "?";
}

}  // namespace

// What a subgraph gets once, when its plan is built (the session's passes run on the main graph
// only): its Constant nodes become initializers, so they cost nothing per call and kernels see
// them as constants (weights packed at load), and its Conv chains are fused as the main graph's.
void PrepareSubgraph(Graph& g) {
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    const Attribute* v = n.domain.empty() && n.op_type == "Constant" && n.outputs.size() == 1 ? n.FindAttr("value") : nullptr;
    if (v != nullptr && v->type == Attribute::Type::kTensor && !g.IsInitializer(n.outputs[0])) {
      g.initializers[n.outputs[0]] = v->t;
      continue;
    }
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
  UseDefIndex uses(g);
  FuseConvChains(g, uses);
}

// KernelInit for one node of a plan being built.
class PlanInit : public KernelInit {
 public:
  PlanInit(const ExecutionPlan& plan, const Node& node, int64_t opset, const std::set<std::string>& visible)
      : plan_(plan), node_(node), opset_(opset), visible_(visible) {}
  const Node& node() const override { return node_; }
  int64_t opset() const override { return opset_; }
  const Tensor* ConstantInput(size_t i) const override {
    if (!node_.HasInput(i)) return nullptr;
    const int s = plan_.SlotOf(node_.inputs[i]);
    if (s < 0) return nullptr;
    const auto& slot = plan_.slots_[static_cast<size_t>(s)];
    if (slot.kind != ExecutionPlan::SlotKind::kConstant || !slot.constant.is_tensor()) return nullptr;
    return &slot.constant.tensor;
  }
  const TypeInfo* InputType(size_t i) const override {
    return node_.HasInput(i) ? plan_.graph_->FindType(node_.inputs[i]) : nullptr;
  }
  const TypeInfo* OutputType(size_t i) const override {
    return node_.HasOutput(i) ? plan_.graph_->FindType(node_.outputs[i]) : nullptr;
  }
  absl::StatusOr<std::unique_ptr<SubgraphRunner>> CompileSubgraph(const Graph& g) const override {
    // The subgraph is owned by the node's attribute, which outlives the plan that runs it.
    auto mutable_copy = std::make_shared<Graph>(g);
    auto s = SortTopologically(*mutable_copy, visible_);
    if (!s.ok()) return s;
    PrepareSubgraph(*mutable_copy);
    auto plan = ExecutionPlan::Build(mutable_copy, plan_.res_, visible_);
    if (!plan.ok()) return plan.status();
    return std::unique_ptr<SubgraphRunner>(std::move(*plan));
  }
  const KernelConfig& config() const override { return plan_.res_.config->kernels; }

 private:
  const ExecutionPlan& plan_;
  const Node& node_;
  int64_t opset_;
  const std::set<std::string>& visible_;
};

// OpContext for one step of one run.
class PlanContext : public OpContext {
 public:
  // release: the slots this run frees after the step (their last reader is this step).
  // donated: one flag per slot (null = none), the run's donated inputs.
  PlanContext(const ExecutionPlan& plan, const ExecutionPlan::Step& step, std::vector<const Value*>& ptr,
              std::vector<Value>& owned, const RunControl& run, const std::vector<int>& release,
              const std::vector<bool>* donated)
      : plan_(plan), step_(step), ptr_(ptr), owned_(owned), run_(run), release_(release), donated_(donated),
        scratch_(step.outputs.size()) {}

  const Node& node() const override { return *step_.node; }
  int64_t opset() const override { return step_.opset; }
  size_t num_inputs() const override { return step_.inputs.size(); }
  bool has_input(size_t i) const override { return i < step_.inputs.size() && step_.inputs[i] >= 0; }
  const Value* input_value(size_t i) const override {
    return has_input(i) ? ptr_[static_cast<size_t>(step_.inputs[i])] : nullptr;
  }
  size_t num_outputs() const override { return step_.outputs.size(); }
  bool has_output(size_t i) const override { return i < step_.outputs.size() && step_.outputs[i] >= 0; }
  Value& OutputSlot(size_t i) {
    if (!has_output(i)) {
      if (i >= scratch_.size()) scratch_.resize(i + 1);
      return scratch_[i];
    }
    const size_t s = static_cast<size_t>(step_.outputs[i]);
    ptr_[s] = &owned_[s];
    return owned_[s];
  }
  Tensor& AllocateOutput(size_t i, DType dtype, const Shape& shape) override {
    Value& v = OutputSlot(i);
    v = Value::FromTensor(plan_.res_.allocator->Allocate(dtype, shape));
    return v.tensor;
  }
  Tensor& AllocateOutputUninitialized(size_t i, DType dtype, const Shape& shape) override {
    Value& v = OutputSlot(i);
    v = Value::FromTensor(plan_.res_.allocator->Allocate(dtype, shape, /*zero=*/false));
    return v.tensor;
  }
  Tensor* ReuseInputAsOutput(size_t k, size_t i, DType dtype, const Shape& shape) override {
    if (!has_input(k) || !has_output(i)) return nullptr;
    const int s = step_.inputs[k];
    const auto slot = static_cast<size_t>(s);
    if (DonatedToThisStep(slot, s)) {
      const Value& v = *ptr_[slot];
      if (!v.is_tensor() || v.tensor.dtype() != dtype || v.tensor.shape() != shape) return nullptr;
      Value& out = OutputSlot(i);
      out = v;
      return &out.tensor;
    }
    // A node output of this run (not a feed, constant or outer value), read by no later step.
    if (plan_.slots_[slot].kind != ExecutionPlan::SlotKind::kNodeOutput || ptr_[slot] != &owned_[slot]) return nullptr;
    if (std::find(release_.begin(), release_.end(), s) == release_.end()) return nullptr;
    for (int other : step_.implicit_inputs) if (other == s) return nullptr;
    const Value& v = owned_[slot];
    // The only tensor on its storage: no view (Reshape, Identity), sequence or output shares it.
    if (!v.is_tensor() || v.tensor.dtype() != dtype || v.tensor.shape() != shape || v.tensor.holder() == nullptr ||
        v.tensor.holder().use_count() != 1 || v.tensor.raw_data() != v.tensor.holder().get()) {
      return nullptr;
    }
    Value& out = OutputSlot(i);
    out = v;
    return &out.tensor;
  }
  void SetOutput(size_t i, Tensor t) override { OutputSlot(i) = Value::FromTensor(std::move(t)); }
  void SetOutputValue(size_t i, Value v) override { OutputSlot(i) = std::move(v); }
  Tensor AllocateTemp(DType dtype, const Shape& shape, bool zero = true) override {
    return plan_.res_.allocator->Allocate(dtype, shape, zero);
  }
  ThreadPool* thread_pool() const override { return plan_.res_.pool; }
  const RunControl& run_control() const override { return run_; }
  const Value* LookupOuterScope(const std::string& name) const override {
    for (size_t k = 0; k < step_.implicit_names.size(); ++k) {
      if (step_.implicit_names[k] == name) return ptr_[static_cast<size_t>(step_.implicit_inputs[k])];
    }
    return nullptr;
  }
  // A fed input the caller donated (RunRequest::donated), read by this step alone and only
  // once, and not itself a graph output: its storage is this step's to overwrite.
  bool DonatedToThisStep(size_t slot, int s) const {
    if (donated_ == nullptr || slot >= donated_->size() || !(*donated_)[slot]) return false;
    const auto& outs = plan_.output_slots_;
    return plan_.slots_[slot].kind == ExecutionPlan::SlotKind::kInput && plan_.slots_[slot].readers == 1 &&
           ptr_[slot] != nullptr && ptr_[slot] != &plan_.slots_[slot].constant &&
           std::find(outs.begin(), outs.end(), s) == outs.end();
  }
  bool InputDonated(size_t k) const override {
    if (!has_input(k)) return false;
    const auto slot = static_cast<size_t>(step_.inputs[k]);
    return donated_ != nullptr && slot < donated_->size() && (*donated_)[slot] &&
           plan_.slots_[slot].kind == ExecutionPlan::SlotKind::kInput && ptr_[slot] != nullptr &&
           ptr_[slot] != &plan_.slots_[slot].constant;
  }
  bool produced(size_t i) const {
    return !has_output(i) || ptr_[static_cast<size_t>(step_.outputs[i])] == &owned_[static_cast<size_t>(step_.outputs[i])];
  }

 private:
  const ExecutionPlan& plan_;
  const ExecutionPlan::Step& step_;
  std::vector<const Value*>& ptr_;
  std::vector<Value>& owned_;
  const RunControl& run_;
  const std::vector<int>& release_;
  const std::vector<bool>* donated_;
  std::vector<Value> scratch_;
};

int ExecutionPlan::SlotOf(const std::string& name) const {
  for (size_t i = 0; i < slots_.size(); ++i) if (slots_[i].name == name) return static_cast<int>(i);
  return -1;
}

absl::StatusOr<std::unique_ptr<ExecutionPlan>> ExecutionPlan::Build(std::shared_ptr<const Graph> graph,
                                                                    const Resources& resources,
                                                                    const std::set<std::string>& outer_names) {
  std::unique_ptr<ExecutionPlan> plan(new ExecutionPlan());
  plan->graph_ = graph;
  plan->res_ = resources;
  const Graph& g = *graph;
  std::map<std::string, int> index;
  auto add_slot = [&](const std::string& name, SlotKind kind) -> int {
    auto it = index.find(name);
    if (it != index.end()) return it->second;
    Slot s;
    s.name = name;
    s.kind = kind;
    plan->slots_.push_back(std::move(s));
    const int id = static_cast<int>(plan->slots_.size()) - 1;
    index[name] = id;
    return id;
  };

  // Phase 1: a slot for every name.
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const int s = add_slot(g.inputs[i].name, SlotKind::kInput);
    Slot& slot = plan->slots_[static_cast<size_t>(s)];
    slot.input_index = static_cast<int>(i);
    auto it = g.initializers.find(g.inputs[i].name);
    if (it != g.initializers.end()) {
      slot.constant = Value::FromTensor(it->second);
      slot.has_constant = true;
    }
    plan->input_slots_.push_back(s);
  }
  for (const auto& [name, t] : g.initializers) {
    if (index.count(name)) continue;
    const int s = add_slot(name, SlotKind::kConstant);
    plan->slots_[static_cast<size_t>(s)].constant = Value::FromTensor(t);
    plan->slots_[static_cast<size_t>(s)].has_constant = true;
  }
  for (const Node& n : g.nodes) {
    for (const std::string& out : n.outputs) if (!out.empty()) add_slot(out, SlotKind::kNodeOutput);
  }
  auto resolve = [&](const std::string& name) -> absl::StatusOr<int> {
    auto it = index.find(name);
    if (it != index.end()) return it->second;
    if (!outer_names.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not defined in graph '", g.name, "'"));
    }
    return add_slot(name, SlotKind::kOuter);
  };

  // Names visible to subgraphs of this graph.
  std::set<std::string> visible = outer_names;
  for (const auto& [name, id] : index) visible.insert(name);

  // Phase 2: a kernel per node.
  auto& registry = KernelRegistry::Global();
  for (const Node& n : g.nodes) {
    Step step;
    step.node = &n;
    step.opset = g.OpsetFor(n.domain);
    if (step.opset < 0) {
      return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": the model imports no opset for domain '", n.domain, "'"));
    }
    for (const std::string& in : n.inputs) {
      if (in.empty()) {
        step.inputs.push_back(-1);
        continue;
      }
      auto s = resolve(in);
      if (!s.ok()) return WithNode(s.status(), n);
      step.inputs.push_back(*s);
    }
    for (const std::string& name : n.implicit_inputs) {
      auto s = resolve(name);
      if (!s.ok()) return WithNode(s.status(), n);
      step.implicit_inputs.push_back(*s);
      step.implicit_names.push_back(name);
    }
    for (const std::string& out : n.outputs) step.outputs.push_back(out.empty() ? -1 : index.at(out));

    const KernelRegistry::Entry* entry = registry.Find(n.domain, n.op_type, step.opset);
    if (entry == nullptr) {
      const std::string dom = n.domain.empty() ? "ai.onnx" : n.domain;
      if (registry.Knows(n.domain, n.op_type)) {
        return absl::UnimplementedError(absl::StrCat(n.Describe(), ": operator ", dom, ".", n.op_type,
                                                     " is not supported at opset ", step.opset));
      }
      return absl::UnimplementedError(absl::StrCat(n.Describe(), ": unsupported operator ", dom, ".", n.op_type));
    }
    step.accepts_non_tensors = entry->accepts_non_tensors;
    PlanInit init(*plan, n, step.opset, visible);
    auto kernel = entry->factory(init);
    if (!kernel.ok()) return WithNode(kernel.status(), n);
    step.kernel = std::move(*kernel);
    plan->steps_.push_back(std::move(step));
  }
  for (const ValueInfo& out : g.outputs) {
    auto s = resolve(out.name);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("graph output '", out.name, "' is never produced"));
    plan->output_slots_.push_back(*s);
  }

  for (const Step& step : plan->steps_) {
    for (int s : step.inputs) if (s >= 0) ++plan->slots_[static_cast<size_t>(s)].readers;
    for (int s : step.implicit_inputs) ++plan->slots_[static_cast<size_t>(s)].readers;
  }

  // Phase 3: release each node output after its last reader.
  std::vector<size_t> all(plan->steps_.size());
  std::iota(all.begin(), all.end(), size_t{0});
  std::vector<std::vector<int>> release = plan->ReleaseLists(all);
  for (size_t k = 0; k < all.size(); ++k) plan->steps_[k].release_after = std::move(release[k]);
  return plan;
}

absl::Status ExecutionPlan::PrepareWeights() const {
  for (const Step& step : steps_) {
    if (absl::Status s = step.kernel->PrepareWeights(res_.pool); !s.ok()) return WithNode(s, *step.node);
  }
  return absl::OkStatus();
}

std::vector<std::vector<int>> ExecutionPlan::ReleaseLists(const std::vector<size_t>& order) const {
  std::vector<int> last_use(slots_.size(), -1);  // index into order
  for (size_t j = 0; j < order.size(); ++j) {
    const Step& st = steps_[order[j]];
    const int at = static_cast<int>(j);
    for (int s : st.inputs) if (s >= 0) last_use[static_cast<size_t>(s)] = at;
    for (int s : st.implicit_inputs) last_use[static_cast<size_t>(s)] = at;
    // An output nobody reads is released right after the step that made it.
    for (int s : st.outputs) if (s >= 0 && last_use[static_cast<size_t>(s)] < at) last_use[static_cast<size_t>(s)] = at;
  }
  std::vector<std::vector<int>> release(order.size());
  const std::set<int> kept(output_slots_.begin(), output_slots_.end());
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].kind != SlotKind::kNodeOutput || kept.count(static_cast<int>(s)) || last_use[s] < 0) continue;
    release[static_cast<size_t>(last_use[s])].push_back(static_cast<int>(s));
  }
  return release;
}

ExecutionPlan::Schedule ExecutionPlan::PrunedSchedule(const std::vector<bool>& wanted) const {
  std::vector<char> needed(slots_.size(), 0);
  for (size_t i = 0; i < output_slots_.size(); ++i) {
    if (wanted[i]) needed[static_cast<size_t>(output_slots_[i])] = 1;
  }
  std::vector<char> runs(steps_.size(), 0);
  for (size_t k = steps_.size(); k-- > 0;) {
    const Step& st = steps_[k];
    for (int s : st.outputs) if (s >= 0 && needed[static_cast<size_t>(s)]) runs[k] = 1;
    if (!runs[k]) continue;
    for (int s : st.inputs) if (s >= 0) needed[static_cast<size_t>(s)] = 1;
    for (int s : st.implicit_inputs) needed[static_cast<size_t>(s)] = 1;
  }
  Schedule schedule;
  for (size_t k = 0; k < steps_.size(); ++k) if (runs[k]) schedule.steps.push_back(k);
  schedule.release_after = ReleaseLists(schedule.steps);
  return schedule;
}

absl::Status ExecutionPlan::BindSlots(const std::vector<const Value*>& inputs, const OuterLookup& outer,
                                      std::vector<const Value*>& ptr) const {
  ptr.assign(slots_.size(), nullptr);
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Slot& slot = slots_[s];
    switch (slot.kind) {
      case SlotKind::kConstant:
        ptr[s] = &slot.constant;
        break;
      case SlotKind::kInput: {
        const size_t i = static_cast<size_t>(slot.input_index);
        const Value* v = i < inputs.size() ? inputs[i] : nullptr;
        if (v == nullptr && slot.has_constant) v = &slot.constant;
        if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat("input '", slot.name, "' is missing"));
        ptr[s] = v;
        break;
      }
      case SlotKind::kOuter: {
        const Value* v = outer ? outer(slot.name) : nullptr;
        if (v == nullptr) return absl::InternalError(absl::StrCat("outer-scope value '", slot.name, "' is unavailable"));
        ptr[s] = v;
        break;
      }
      case SlotKind::kNodeOutput:
        break;
    }
  }
  return absl::OkStatus();
}

absl::Status ExecutionPlan::RunStep(const Step& step, std::vector<const Value*>& ptr, std::vector<Value>& owned,
                                    const RunControl& run, const std::vector<int>& release,
                                    const std::vector<bool>* donated) const {
  const Node& n = *step.node;
  if (!step.accepts_non_tensors) {
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (step.inputs[i] < 0) continue;
      const Value* v = ptr[static_cast<size_t>(step.inputs[i])];
      if (v == nullptr) return absl::InternalError(absl::StrCat(n.Describe(), ": input '", n.inputs[i], "' was not computed"));
      if (!v->is_tensor()) {
        return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": input '", n.inputs[i], "' is ", KindName(*v),
                                                       ", expected a tensor"));
      }
    }
  }
  PlanContext ctx(*this, step, ptr, owned, run, release, donated);
  absl::Status s;
  try {
    s = step.kernel->Compute(ctx);
  } catch (const std::bad_alloc& e) {
    // Allocations return references (OpContext::AllocateOutput), so running out of memory or
    // asking for an impossible size arrives as an exception: it becomes this node's error.
    s = absl::ResourceExhaustedError(e.what());
  } catch (const std::length_error& e) {
    // A std::vector or string sized from data past max_size().
    s = absl::ResourceExhaustedError(absl::StrCat("a size from the data is too large (", e.what(), ")"));
  } catch (const std::exception& e) {
    s = absl::InternalError(absl::StrCat("unexpected exception: ", e.what()));
  }
  if (!s.ok()) return WithNode(s, n);
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    if (!ctx.produced(i)) {
      return absl::InternalError(absl::StrCat(n.Describe(), ": the kernel did not produce output '", n.outputs[i], "'"));
    }
  }
  Release(release, ptr, owned);
  return absl::OkStatus();
}

void ExecutionPlan::Release(const std::vector<int>& release, std::vector<const Value*>& ptr, std::vector<Value>& owned) {
  for (int r : release) {
    owned[static_cast<size_t>(r)] = Value();
    ptr[static_cast<size_t>(r)] = nullptr;
  }
}

absl::StatusOr<std::vector<Value>> ExecutionPlan::Collect(const std::vector<const Value*>& ptr,
                                                          const std::vector<bool>& wanted) const {
  std::vector<Value> results;
  results.reserve(output_slots_.size());
  for (size_t i = 0; i < output_slots_.size(); ++i) {
    const int s = output_slots_[i];
    const Value* v = ptr[static_cast<size_t>(s)];
    if (v == nullptr && !wanted.empty() && !wanted[i]) {
      results.emplace_back();
      continue;
    }
    if (v == nullptr) return absl::InternalError(absl::StrCat("output '", slots_[static_cast<size_t>(s)].name, "' was not computed"));
    results.push_back(*v);
  }
  return results;
}

absl::StatusOr<std::vector<Value>> ExecutionPlan::Execute(const std::vector<const Value*>& inputs,
                                                          const OuterLookup& outer, const RunControl& run,
                                                          const RunRequest& request) const {
  auto results = RunLockstep({inputs}, outer, run, request, nullptr);
  if (!results.ok()) return results.status();
  return std::move(results->front());
}

absl::StatusOr<std::vector<std::vector<Value>>> ExecutionPlan::ExecuteBatch(
    const std::vector<std::vector<const Value*>>& inputs, const RunControl& run, const RunRequest& request,
    LockstepCounts* counts) const {
  return RunLockstep(inputs, nullptr, run, request, counts);
}

void ExecutionPlan::NarrowToLastRow(const Step& step, std::vector<std::vector<const Value*>>& ptr,
                                    std::vector<Value>& views) const {
  const int row_input = step.kernel->RowwiseInput();
  if (row_input < 0 || static_cast<size_t>(row_input) >= step.inputs.size() || step.inputs[static_cast<size_t>(row_input)] < 0) return;
  const size_t rs = static_cast<size_t>(step.inputs[static_cast<size_t>(row_input)]);
  views.assign(ptr.size(), Value());
  for (size_t b = 0; b < ptr.size(); ++b) {
    const Value* v = ptr[b][rs];
    if (v == nullptr || !v->is_tensor() || v->tensor.rank() < 2 || v->tensor.dtype() == DType::kString) continue;
    const Tensor& t = v->tensor;
    bool one_block = t.dim(-2) > 1;  // rows of one block only: the last is the last position
    for (int64_t d = 0; d + 2 < t.rank(); ++d) one_block = one_block && t.dim(d) == 1;
    if (!one_block) continue;
    Shape shape(static_cast<size_t>(t.rank()), 1);
    shape.back() = t.dim(-1);
    const size_t row_bytes = static_cast<size_t>(t.dim(-1)) * DTypeSize(t.dtype());
    const char* last = static_cast<const char*>(t.raw_data()) + static_cast<size_t>(t.dim(-2) - 1) * row_bytes;
    views[b] = Value::FromTensor(Tensor::Wrap(t.dtype(), std::move(shape), t.holder(), const_cast<char*>(last)));
    ptr[b][rs] = &views[b];
  }
}

absl::StatusOr<std::vector<std::vector<Value>>> ExecutionPlan::RunLockstep(
    const std::vector<std::vector<const Value*>>& inputs, const OuterLookup& outer, const RunControl& run,
    const RunRequest& request, LockstepCounts* counts) const {
  const std::vector<bool>& wanted = request.wanted;
  const std::vector<bool>& last_row = request.last_row;
  if ((!wanted.empty() && wanted.size() != output_slots_.size()) || (!last_row.empty() && last_row.size() != output_slots_.size())) {
    return absl::InternalError(absl::StrCat("Execute: ", wanted.size(), " and ", last_row.size(), " output flags for ",
                                            output_slots_.size(), " outputs"));
  }
  // The donated inputs as one flag per slot (one pass over the slots).
  std::vector<bool> donated;
  if (std::find(request.donated.begin(), request.donated.end(), true) != request.donated.end()) {
    donated.assign(slots_.size(), false);
    for (size_t s = 0; s < slots_.size(); ++s) {
      const int i = slots_[s].input_index;
      donated[s] = slots_[s].kind == SlotKind::kInput && i >= 0 && static_cast<size_t>(i) < request.donated.size() &&
                   request.donated[static_cast<size_t>(i)];
    }
  }
  const std::vector<bool>* donated_slots = donated.empty() ? nullptr : &donated;
  // The steps producing a last-row output (RunOptions::last_row_outputs), in one pass over the steps.
  std::vector<bool> narrow(steps_.size(), false);
  if (std::find(last_row.begin(), last_row.end(), true) != last_row.end()) {
    std::vector<bool> last_row_slot(slots_.size(), false);
    for (size_t i = 0; i < last_row.size(); ++i) if (last_row[i]) last_row_slot[static_cast<size_t>(output_slots_[i])] = true;
    for (size_t k = 0; k < steps_.size(); ++k) {
      const auto& outs = steps_[k].outputs;
      narrow[k] = outs.size() == 1 && outs[0] >= 0 && last_row_slot[static_cast<size_t>(outs[0])];
    }
  }
  // A run that wants every output takes the plan's own schedule (no copy).
  const bool prune = std::find(wanted.begin(), wanted.end(), false) != wanted.end();
  Schedule pruned;
  if (prune) pruned = PrunedSchedule(wanted);
  const size_t count = prune ? pruned.steps.size() : steps_.size();
  const size_t members = inputs.size();
  if (counts != nullptr) *counts = {};
  std::vector<std::vector<const Value*>> ptr(members);
  std::vector<std::vector<Value>> owned(members, std::vector<Value>(slots_.size()));
  for (size_t b = 0; b < members; ++b) {
    if (absl::Status bound = BindSlots(inputs[b], outer, ptr[b]); !bound.ok()) return bound;
  }
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> ends;
  Clock::time_point start;
  if (profile_) {
    ends.resize(count);
    start = Clock::now();
  }
  auto step_at = [&](size_t j) -> const Step& { return steps_[prune ? pruned.steps[j] : j]; };
  auto release_at = [&](size_t j) -> const std::vector<int>& {
    return prune ? pruned.release_after[j] : steps_[j].release_after;
  };
  // Every member takes each step before any takes the next: a row-wise step runs once over all
  // their rows, the others once per member. A stretch of per-member steps between two row-wise
  // ones runs side by side where the members are alike: one task a member, taking its steps in
  // order (a member's steps only read its own values and the shared constants).
  for (size_t j = 0; j < count; ++j) {
    const size_t k = prune ? pruned.steps[j] : j;
    const Step& step = steps_[k];
    if (absl::Status stop = run.Check(); !stop.ok()) return WithNode(stop, *step.node);  // names where it stopped
    if (members > 1 && PerMember(step) && MembersSideBySide(step, ptr)) {
      size_t end = j + 1;
      while (end < count && PerMember(step_at(end))) ++end;
      std::vector<absl::Status> status(members);
      std::vector<std::vector<double>> took(profile_ ? members : 0, std::vector<double>(end - j, 0.0));
      res_.pool->RunTasks(static_cast<int64_t>(members), [&](int64_t task) {
        const auto b = static_cast<size_t>(task);
        for (size_t i = j; i < end && status[b].ok(); ++i) {
          const Clock::time_point t0 = profile_ ? Clock::now() : Clock::time_point();
          if (i > j) status[b] = run.Check();
          if (!status[b].ok()) status[b] = WithNode(status[b], *step_at(i).node);
          else status[b] = RunStep(step_at(i), ptr[b], owned[b], run, release_at(i), donated_slots);
          if (profile_) took[b][i - j] = std::chrono::duration<double>(Clock::now() - t0).count();
        }
      });
      // The first error in member order is the run's, as in the member-by-member loop.
      for (absl::Status& st : status) if (!st.ok()) return st;
      if (counts != nullptr) ++counts->side_by_side;
      if (profile_) {  // the stretch's wall time, shared out by the time its steps took in the tasks
        const Clock::time_point began = j == 0 ? start : ends[j - 1], done = Clock::now();
        std::vector<double> sum(end - j, 0.0);
        double all = 0;
        for (const auto& t : took) for (size_t i = 0; i < t.size(); ++i) sum[i] += t[i], all += t[i];
        double before = 0;
        for (size_t i = j; i < end; ++i) {
          before += sum[i - j];
          ends[i] = began + std::chrono::duration_cast<Clock::duration>((done - began) * (all > 0 ? before / all : 1.0));
        }
        ends[end - 1] = done;
      }
      j = end - 1;
      continue;
    }
    const std::vector<int>& release = release_at(j);
    bool ran = false;
    std::vector<Value> last_rows;  // views of the row inputs' last rows, for a narrowed step
    std::vector<const Value*> whole;  // the row inputs they replace
    size_t row_slot = 0;
    if (narrow[k] && step.kernel->RowwiseInput() >= 0 && !step.kernel->RowwiseElementwise()) {
      row_slot = static_cast<size_t>(step.inputs[static_cast<size_t>(step.kernel->RowwiseInput())]);
      for (const auto& p : ptr) whole.push_back(p[row_slot]);
      NarrowToLastRow(step, ptr, last_rows);
    }
    if (members > 1 && step.kernel->RowwiseInput() >= 0) {
      auto stacked = RunStacked(step, ptr, owned, run, release);
      if (!stacked.ok()) return stacked.status();
      if (*stacked && counts != nullptr) ++counts->stacked;
      ran = *stacked;
    }
    for (size_t b = 0; b < members && !ran; ++b) {
      if (absl::Status s = RunStep(step, ptr[b], owned[b], run, release, donated_slots); !s.ok()) return s;
    }
    // A narrowed input that outlives the step points at the whole value again.
    for (size_t b = 0; b < whole.size(); ++b) {
      if (!last_rows.empty() && ptr[b][row_slot] == &last_rows[b]) ptr[b][row_slot] = whole[b];
    }
    if (profile_) ends[j] = Clock::now();
  }
  if (profile_) {
    std::vector<size_t> ran_steps = pruned.steps;
    if (!prune) {
      ran_steps.resize(steps_.size());
      std::iota(ran_steps.begin(), ran_steps.end(), size_t{0});
    }
    LogProfile(start, ran_steps, ends);
  }
  std::vector<std::vector<Value>> results;
  results.reserve(members);
  for (size_t b = 0; b < members; ++b) {
    auto r = Collect(ptr[b], prune ? wanted : std::vector<bool>{});
    if (!r.ok()) return r.status();
    results.push_back(std::move(*r));
  }
  return results;
}

bool ExecutionPlan::PerMember(const Step& step) { return step.kernel->RowwiseInput() < 0 && step.implicit_inputs.empty(); }

bool ExecutionPlan::MembersSideBySide(const Step& step, const std::vector<std::vector<const Value*>>& ptr) const {
  const ThreadPool* pool = res_.pool;
  if (ptr.size() < 2 || pool == nullptr || pool->num_threads() < 2) return false;
  int64_t total = 0, largest = 0;
  for (const auto& p : ptr) {
    int64_t elements = 0;
    for (int s : step.inputs) {
      const Value* v = s >= 0 ? p[static_cast<size_t>(s)] : nullptr;
      if (v != nullptr && v->is_tensor()) elements += v->tensor.num_elements();
    }
    total += elements;
    largest = std::max(largest, elements);
  }
  return total > 0 && largest * pool->num_threads() <= total;
}

absl::StatusOr<bool> ExecutionPlan::RunStacked(const Step& step, std::vector<std::vector<const Value*>>& ptr,
                                               std::vector<std::vector<Value>>& owned, const RunControl& run,
                                               const std::vector<int>& release) const {
  const int row_input = step.kernel->RowwiseInput();
  if (step.outputs.empty() || std::find(step.outputs.begin(), step.outputs.end(), -1) != step.outputs.end() ||
      static_cast<size_t>(row_input) >= step.inputs.size() || step.inputs[static_cast<size_t>(row_input)] < 0 ||
      !step.implicit_inputs.empty()) {
    return false;
  }
  const size_t rs = static_cast<size_t>(step.inputs[static_cast<size_t>(row_input)]);
  const bool elementwise = step.kernel->RowwiseElementwise();
  // The slots stacked: the row input's and, for an elementwise kernel, every other input that
  // differs between the members. The rest must be one value shared by every member (a constant
  // weight, scales; for an elementwise kernel one of rank <= 1, broadcast along the last axis).
  std::vector<size_t> row_slots = {rs};
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    if (static_cast<int>(i) == row_input || step.inputs[i] < 0) continue;
    const size_t s = static_cast<size_t>(step.inputs[i]);
    bool shared = s != rs;
    for (const auto& p : ptr) shared = shared && p[s] == ptr[0][s];
    if (shared) {
      if (elementwise && (ptr[0][s] == nullptr || !ptr[0][s]->is_tensor() || ptr[0][s]->tensor.rank() > 1)) return false;
      continue;
    }
    if (!elementwise) return false;
    if (std::find(row_slots.begin(), row_slots.end(), s) == row_slots.end()) row_slots.push_back(s);
  }
  // The members' row inputs: tensors of one dtype and one row width (a bad one is left to the
  // per-member path, which reports it); an elementwise kernel's all of the row input's shape, in
  // whole cache lines, so that a row's reductions see the alignment they see alone.
  const Value* first = ptr[0][rs];
  if (first == nullptr || !first->is_tensor() || first->tensor.rank() < 1) return false;
  const DType dtype = first->tensor.dtype();
  const int64_t width = first->tensor.dim(-1);
  if (width <= 0 || dtype == DType::kString) return false;
  const size_t row_bytes = static_cast<size_t>(width) * DTypeSize(dtype);
  constexpr size_t kLine = 64;
  if (elementwise && row_bytes % kLine != 0) return false;
  std::vector<int64_t> rows;
  int64_t total = 0;
  for (const auto& p : ptr) {
    for (size_t s : row_slots) {
      const Value* v = p[s];
      if (v == nullptr || !v->is_tensor() || v->tensor.dtype() != dtype || v->tensor.rank() < 1 ||
          v->tensor.dim(-1) != width) {
        return false;
      }
      if (elementwise && (v->tensor.shape() != p[rs]->tensor.shape() ||
                          reinterpret_cast<uintptr_t>(v->tensor.raw_data()) % kLine != 0)) {
        return false;
      }
    }
    rows.push_back(p[rs]->tensor.num_elements() / width);
    total += rows.back();
  }
  // Each slot's rows as one [total, width] tensor: a view where the members' rows already lie one
  // after the other in one block (the outputs of a stacked step), else a copy.
  std::vector<Value> stacked(row_slots.size());
  for (size_t k = 0; k < row_slots.size(); ++k) {
    const size_t s = row_slots[k];
    const Tensor& t0 = ptr[0][s]->tensor;
    bool contiguous = t0.holder() != nullptr;
    const char* next = static_cast<const char*>(t0.raw_data());
    for (size_t b = 0; b < ptr.size() && contiguous; ++b) {
      const Tensor& t = ptr[b][s]->tensor;
      contiguous = t.raw_data() == next && t.holder() == t0.holder();
      next += static_cast<size_t>(rows[b]) * row_bytes;
    }
    if (contiguous) {
      stacked[k] = Value::FromTensor(Tensor::Wrap(dtype, {total, width}, t0.holder(), const_cast<void*>(t0.raw_data())));
      continue;
    }
    stacked[k] = Value::FromTensor(res_.allocator->Allocate(dtype, {total, width}, /*zero=*/false));
    char* dst = static_cast<char*>(stacked[k].tensor.raw_data());
    for (size_t b = 0; b < ptr.size(); ++b) {
      std::memcpy(dst, ptr[b][s]->tensor.raw_data(), static_cast<size_t>(rows[b]) * row_bytes);
      dst += static_cast<size_t>(rows[b]) * row_bytes;
    }
  }
  // Member 0's context computes the stacked rows; its releases wait until the rows are split.
  std::vector<const Value*> own_rows(row_slots.size());
  for (size_t k = 0; k < row_slots.size(); ++k) {
    own_rows[k] = ptr[0][row_slots[k]];
    ptr[0][row_slots[k]] = &stacked[k];
  }
  absl::Status s = RunStep(step, ptr[0], owned[0], run, {});
  for (size_t k = 0; k < row_slots.size(); ++k) ptr[0][row_slots[k]] = own_rows[k];
  if (!s.ok()) return s;
  // Each member's outputs are its rows of each result (views sharing their storage).
  for (int o : step.outputs) {
    const size_t os = static_cast<size_t>(o);
    Value out = owned[0][os];
    if (!out.is_tensor() || out.tensor.rank() != 2 || out.tensor.dim(0) != total) {
      return absl::InternalError(absl::StrCat(step.node->Describe(), ": a row-wise kernel gave ",
                                              out.is_tensor() ? ShapeToString(out.tensor.shape()) : "a non-tensor",
                                              " for ", total, " stacked rows"));
    }
    const int64_t out_width = out.tensor.dim(1);
    const size_t out_row_bytes = static_cast<size_t>(out_width) * DTypeSize(out.tensor.dtype());
    char* src = static_cast<char*>(out.tensor.raw_data());
    for (size_t b = 0; b < ptr.size(); ++b) {
      Shape shape = ptr[b][rs]->tensor.shape();
      shape.back() = out_width;
      owned[b][os] = Value::FromTensor(Tensor::Wrap(out.tensor.dtype(), std::move(shape), out.tensor.holder(), src));
      ptr[b][os] = &owned[b][os];
      src += static_cast<size_t>(rows[b]) * out_row_bytes;
    }
  }
  for (size_t b = 0; b < ptr.size(); ++b) Release(release, ptr[b], owned[b]);
  return true;
}

void ExecutionPlan::LogProfile(std::chrono::steady_clock::time_point start, const std::vector<size_t>& ran,
                               const std::vector<std::chrono::steady_clock::time_point>& ends) const {
  constexpr size_t kTop = 20;
  std::vector<double> ms(ends.size());
  for (size_t k = 0; k < ends.size(); ++k) {
    ms[k] = std::chrono::duration<double, std::milli>(ends[k] - (k == 0 ? start : ends[k - 1])).count();
  }
  std::vector<size_t> order(ms.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ms[a] > ms[b]; });
  const double total = std::accumulate(ms.begin(), ms.end(), 0.0);
  std::string text = absl::StrFormat("profile: %.3f ms in %d steps%s", total, ms.size(),
                                     ms.size() > kTop ? absl::StrCat(", the slowest ", kTop, ":") : ":");
  for (size_t i = 0; i < order.size() && i < kTop; ++i) {
    const Node& n = *steps_[ran[order[i]]].node;
    absl::StrAppendFormat(&text, "\n%10.3f ms %5.1f%%  %s '%s'", ms[order[i]], total > 0 ? 100 * ms[order[i]] / total : 0.0,
                          n.op_type, n.name);
  }
  // The same time by operator type, which says where a model's time goes at a glance.
  std::map<std::string, std::pair<double, int>> by_op;
  for (size_t k = 0; k < ms.size(); ++k) {
    auto& e = by_op[steps_[ran[k]].node->op_type];
    e.first += ms[k];
    e.second++;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> ops(by_op.begin(), by_op.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  absl::StrAppend(&text, "\nby operator:");
  for (const auto& [op, e] : ops) absl::StrAppendFormat(&text, "\n%10.3f ms %5.1f%%  %s x%d", e.first, total > 0 ? 100 * e.first / total : 0.0, op, e.second);
  LogWrite(LogLevel::kVerbose, text);
}

absl::StatusOr<std::vector<Value>> ExecutionPlan::Run(OpContext& outer, std::vector<Value> inputs) const {
  if (inputs.size() > graph_->inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("subgraph '", graph_->name, "' takes ", graph_->inputs.size(),
                                                   " inputs, got ", inputs.size()));
  }
  std::vector<const Value*> ptrs;
  for (const Value& v : inputs) ptrs.push_back(&v);
  return Execute(ptrs, [&outer](const std::string& name) { return outer.LookupOuterScope(name); }, outer.run_control());
}

}  // namespace oneinfer
