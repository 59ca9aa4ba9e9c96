#include <chrono>
#include <exception>
#include <map>
#include <new>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/mapped_file.h"
#include "engine/q4nx_binding.h"
#include "engine/session_impl.h"
#include "graph/passes/pass.h"
#include "quant/gemm_s8.h"

namespace oneinfer {

namespace {

// True when every use of `name` is GroupQueryAttention's past_key or past_value (at least one,
// none from a subgraph, not a graph output): nothing else sees its length, so it may carry spare
// rows (IOInfo::kv_share_buffer).
bool ReadOnlyAsGqaPast(const Graph& g, const std::string& name) {
  int uses = 0;
  for (const Node& n : g.nodes) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] != name) continue;
      if (n.domain != "com.microsoft" || n.op_type != "GroupQueryAttention" || (i != 3 && i != 4)) return false;
      ++uses;
    }
    for (const std::string& implicit : n.implicit_inputs) if (implicit == name) return false;
  }
  for (const ValueInfo& out : g.outputs) if (out.name == name) return false;
  return uses > 0;
}

// Session::rotary_limit: the smallest constant cos_cache [positions, rotary / 2] of the graph's
// rotary nodes (an initializer a feed can replace is not constant).
RotaryLimit FindRotaryLimit(const Graph& g) {
  RotaryLimit limit;
  for (const Node& n : g.nodes) {
    size_t slot = 0;
    if (n.domain == "com.microsoft" && n.op_type == "GroupQueryAttention" && n.GetInt("do_rotary", 0) == 1) slot = 7;
    else if (n.domain == "com.microsoft" && n.op_type == "RotaryEmbedding") slot = 2;
    else if (n.domain.empty() && n.op_type == "RotaryEmbedding" && n.inputs.size() > 3 && !n.inputs[3].empty()) slot = 1;
    else continue;
    if (n.inputs.size() <= slot || !g.IsInitializer(n.inputs[slot])) continue;
    bool fed = false;
    for (const ValueInfo& in : g.inputs) fed |= in.name == n.inputs[slot];
    const Tensor& cos = g.initializers.at(n.inputs[slot]);
    if (fed || cos.rank() != 2 || (limit.positions > 0 && cos.dim(0) >= limit.positions)) continue;
    limit = {cos.dim(0), absl::StrCat(n.op_type, " '", n.name, "'"), n.inputs[slot]};
  }
  return limit;
}

IOInfo MakeIOInfo(const ValueInfo& v, bool has_default) {
  IOInfo info;
  info.name = v.name;
  info.has_default = has_default;
  info.is_tensor = v.type.kind == TypeInfo::Kind::kTensor || v.type.kind == TypeInfo::Kind::kUnknown;
  info.dtype = v.type.elem;
  if (v.type.kind == TypeInfo::Kind::kTensor && v.type.shape) {
    info.has_shape = true;
    for (const Dim& d : *v.type.shape) {
      info.shape.push_back(d.is_fixed() ? d.value : -1);
      info.dim_params.push_back(d.param);
    }
  }
  return info;
}

// Outputs of small constant subgraphs (shape arithmetic) are folded; big ones stay as work.
constexpr size_t kMaxFoldedBytes = size_t{1} << 20;
// What folding may allocate while it tries a node: a constant node claiming more (a hostile
// ConstantOfShape) is left to the run, where the session's limits name it, instead of taking
// the machine's memory at load.
constexpr AllocatorLimits kFoldingLimits{size_t{64} << 20, size_t{256} << 20};
// And how long it may spend on one node: a constant node whose loops spin on hostile data (RoiAlign
// with a huge sampling grid) is left to the run, where RunOptions can stop it. Folding is only an
// optimisation: a node not folded computes the same values when the plan runs it.
constexpr std::chrono::seconds kFoldingTimePerNode{2};

// SessionOptions::npu as the router takes it; zero sizes and times keep the defaults.
npu::RouterConfig RouterConfigFrom(const NpuOptions& o) {
  npu::RouterConfig c;
  c.designs = o.designs;
  c.backend = o.emulate ? npu::Backend::kEmulated : npu::Backend::kXrt;
  if (o.weight_cache_mb > 0) c.weight_cache_bytes = o.weight_cache_mb << 20;
  if (o.wait_timeout_ms > 0) c.wait_timeout_ms = o.wait_timeout_ms;
  c.trace = o.trace;
  return c;
}

// The last resort of the public API: an exception thrown inside (the plan already turns a node's
// into its status) becomes a status, so none escapes into the application.
template <typename F>
auto GuardExceptions(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc& e) {
    return absl::ResourceExhaustedError(absl::StrCat("out of memory (", e.what(), ")"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("unexpected exception: ", e.what()));
  } catch (...) {
    return absl::InternalError("unexpected exception of unknown type");
  }
}

// Mapped initializers that only Gather nodes read (embedding tables) and that are big enough to
// matter. A Gather reads a few rows, but each page fault maps the 64 KB around it (the kernel's
// fault-around, which MADV_RANDOM does not stop): 8,000 prompt tokens made 500 MB of a 622 MB
// table resident. The session drops these pages after every run (ReleaseMappedPages).
std::vector<std::string> GatherOnlyTables(const Graph& g) {
  constexpr size_t kMinBytes = size_t{1} << 20;
  std::map<std::string, bool> gather_only;
  auto use = [&](const std::string& name, bool by_gather) {
    if (!g.IsInitializer(name)) return;
    auto [it, fresh] = gather_only.emplace(name, by_gather);
    if (!fresh) it->second = it->second && by_gather;
  };
  for (const Node& n : g.nodes) {
    for (size_t i = 0; i < n.inputs.size(); ++i) use(n.inputs[i], i == 0 && n.domain.empty() && n.op_type == "Gather");
    for (const std::string& name : n.implicit_inputs) use(name, false);
  }
  for (const ValueInfo& out : g.outputs) use(out.name, false);
  std::vector<std::string> tables;
  for (const auto& [name, only] : gather_only) {
    const Tensor& t = g.initializers.at(name);
    if (only && t.dtype() != DType::kString && t.byte_size() >= kMinBytes) tables.push_back(name);
  }
  return tables;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SessionImpl>> SessionImpl::Create(std::unique_ptr<Model> model,
                                                                 const SessionOptions& options) {
  std::unique_ptr<SessionImpl> s(new SessionImpl());
  s->config_.options = options;
  const LogLevel level = options.log_level;
  s->config_.kernels.matmul = options.matmul;
  s->config_.kernels.qdq_trace = options.qdq_trace;
  // This session's router; kernels see it only when it has a usable design.
  if (!options.npu.designs.empty()) {
    s->npu_router_ = std::make_unique<npu::Router>(RouterConfigFrom(options.npu));
    if (s->npu_router_->configured()) s->config_.kernels.int8_offload = s->npu_router_.get();
  }
  int threads = options.num_threads;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  s->pool_ = std::make_unique<ThreadPool>(threads);
  s->allocator_ = Allocator::Create(AllocatorLimits{options.max_tensor_bytes, options.max_intermediate_bytes});
  s->config_.kernels.max_tensor_bytes = options.max_tensor_bytes > 0 ? options.max_tensor_bytes : PhysicalMemoryBytes();

  Graph& g = model->graph;
  const size_t loaded_nodes = g.nodes.size();
  ExecutionPlan::Resources res{&s->config_, s->allocator_, s->pool_.get()};
  // The graph passes (graph/passes/pipeline.cc lists them), with what they need from the options.
  PassContext passes;
  passes.qdq_fusion = options.qdq_fusion;
  passes.weight_fusion = options.weight_fusion;
  passes.constant_folding = options.constant_folding;
  passes.qdq_trace = options.qdq_trace;
  passes.qdq_limits = QdqKernelLimits{PackedWeightsS8::kMaxK};
  passes.max_folded_bytes = kMaxFoldedBytes;
  passes.log_level = level;
  // Weights named by the model's Q4NX file replace their graph inputs before anything else.
  absl::StatusOr<ExternalWeights> external = OpenQ4NXWeightFile(*model);
  if (!external.ok()) return external.status();
  passes.external_weights = *std::move(external);
  ExecutionPlan::Resources fold_res{&s->config_, Allocator::Create(kFoldingLimits), s->pool_.get()};
  passes.evaluate = [&](const Node& n, const std::vector<const Tensor*>& ins) -> absl::StatusOr<std::vector<Tensor>> {
    auto one = std::make_shared<Graph>();
    one->opsets = g.opsets;
    Node copy = n;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (ins[i]) one->initializers[copy.inputs[i]] = *ins[i];
    }
    for (const std::string& out : copy.outputs) if (!out.empty()) one->outputs.push_back(ValueInfo{out, {}});
    one->nodes.push_back(std::move(copy));
    auto plan = ExecutionPlan::Build(one, fold_res, {});
    if (!plan.ok()) return plan.status();
    RunControl fold_control;
    fold_control.deadline = std::chrono::steady_clock::now() + kFoldingTimePerNode;
    auto values = (*plan)->Execute({}, nullptr, fold_control);
    if (!values.ok()) return values.status();
    std::vector<Tensor> out;
    size_t k = 0;
    for (const std::string& name : n.outputs) {
      if (name.empty()) {
        out.emplace_back();
        continue;
      }
      const Value& v = (*values)[k++];
      if (!v.is_tensor()) return absl::InternalError("not a tensor");
      // Folded values must not keep allocator blocks of a transient plan alive for long.
      out.push_back(v.tensor.Clone());
    }
    return out;
  };
  PassReport report;
  passes.report = &report;
  if (absl::Status ran = RunSessionPasses(g, passes); !ran.ok()) return ran;
  s->qdq_fusion_.fused_groups = report.qdq.fused;  // all empty when qdq_fusion is off
  s->qdq_fusion_.forms = report.qdq.forms;
  s->qdq_fusion_.refused = report.qdq.refused;
  s->folded_ = report.counts["constant_folding"];
  const int typed = report.counts["shape_inference"];

  for (const ValueInfo& v : g.inputs) {
    if (g.IsInitializer(v.name)) continue;  // overridable defaults are not part of the interface
    s->inputs_.push_back(MakeIOInfo(v, false));
    s->inputs_.back().kv_share_buffer = ReadOnlyAsGqaPast(g, v.name);
  }
  for (const ValueInfo& v : g.outputs) s->outputs_.push_back(MakeIOInfo(v, false));
  s->rotary_limit_ = FindRotaryLimit(g);

  s->model_ = std::move(model);
  s->graph_ = std::shared_ptr<const Graph>(s->model_, &s->model_->graph);
  for (const std::string& name : GatherOnlyTables(g)) {
    Tensor& t = g.initializers.at(name);
    if (!IsMappedMemory(t.raw_data(), t.byte_size())) continue;
    if (options.resident_tables) {  // a copy of its own: anonymous memory the system keeps
      Tensor copy = t.Clone();
      ReleaseMappedPages(t);
      t = std::move(copy);
    } else {
      s->gather_only_tables_.push_back(t);
    }
  }
  auto plan = ExecutionPlan::Build(s->graph_, res, {});
  if (!plan.ok()) return plan.status();
  s->plan_ = std::move(*plan);
  s->plan_->set_profile(level == LogLevel::kVerbose || options.profile);
  if (options.prepare_weights) {
    if (absl::Status prepared = s->plan_->PrepareWeights(); !prepared.ok()) return prepared;
  }
  size_t initializer_bytes = 0;
  for (const auto& [name, t] : g.initializers) initializer_bytes += t.byte_size();
  Log(level, LogLevel::kInfo,
      absl::StrCat("loaded ", loaded_nodes, " nodes: ", s->folded_, " folded, ", s->plan_->num_steps(), " plan steps, ",
                   threads, " threads, ", initializer_bytes, " initializer bytes, ", typed, " values typed"));
  s->allocator_->ResetPeak();
  return s;
}

absl::Status SessionImpl::CheckFeed(const IOInfo& info, const Value& v) const {
  if (!info.is_tensor) return absl::OkStatus();
  if (!v.is_tensor()) return absl::InvalidArgumentError(absl::StrCat("input '", info.name, "' must be a tensor"));
  const Tensor& t = v.tensor;
  if (info.dtype != DType::kUndefined && t.dtype() != info.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("input '", info.name, "' must be ", DTypeName(info.dtype), ", got ",
                                                   DTypeName(t.dtype())));
  }
  if (!info.has_shape) return absl::OkStatus();
  if (t.rank() != static_cast<int64_t>(info.shape.size())) {
    return absl::InvalidArgumentError(absl::StrCat("input '", info.name, "' must have rank ", info.shape.size(),
                                                   ", got shape ", ShapeToString(t.shape())));
  }
  for (size_t i = 0; i < info.shape.size(); ++i) {
    if (info.shape[i] >= 0 && t.shape()[i] != info.shape[i]) {
      return absl::InvalidArgumentError(absl::StrCat("input '", info.name, "' dimension ", i, " must be ",
                                                     info.shape[i], ", got shape ", ShapeToString(t.shape())));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<const Value*>> SessionImpl::BindFeeds(
    const std::vector<std::pair<std::string, Value>>& feeds) const {
  const Graph& g = *graph_;
  std::vector<const Value*> by_index(g.inputs.size(), nullptr);
  for (const auto& [name, value] : feeds) {
    size_t i = 0;
    while (i < g.inputs.size() && g.inputs[i].name != name) ++i;
    if (i == g.inputs.size()) {
      std::string known;
      for (const IOInfo& in : inputs_) absl::StrAppend(&known, known.empty() ? "" : ", ", in.name);
      return absl::InvalidArgumentError(absl::StrCat("unknown input '", name, "' (the model's inputs: ", known, ")"));
    }
    if (by_index[i] != nullptr) return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is fed twice"));
    auto st = CheckFeed(MakeIOInfo(g.inputs[i], false), value);
    if (!st.ok()) return st;
    by_index[i] = &value;
  }
  // Symbolic dims with one name must agree across the feeds.
  std::map<std::string, std::pair<int64_t, std::string>> params;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (by_index[i] == nullptr) {
      if (!g.IsInitializer(g.inputs[i].name)) {
        return absl::InvalidArgumentError(absl::StrCat("input '", g.inputs[i].name, "' is missing"));
      }
      continue;
    }
    const TypeInfo& type = g.inputs[i].type;
    if (!by_index[i]->is_tensor() || !type.shape) continue;
    for (size_t d = 0; d < type.shape->size(); ++d) {
      const std::string& p = (*type.shape)[d].param;
      if (p.empty()) continue;
      const int64_t size = by_index[i]->tensor.shape()[d];
      auto [it, fresh] = params.emplace(p, std::make_pair(size, g.inputs[i].name));
      if (!fresh && it->second.first != size) {
        return absl::InvalidArgumentError(absl::StrCat("input '", g.inputs[i].name, "' has ", p, " = ", size,
                                                       " but input '", it->second.second, "' has ", p, " = ",
                                                       it->second.first));
      }
    }
  }
  return by_index;
}

namespace {

RunControl ControlOf(const RunOptions* run) {
  RunControl control;
  if (run != nullptr) {
    control.cancel = &run->cancel;
    control.also_cancel = run->also_cancel;
    control.deadline = run->deadline;
    control.grow_kv_in_place = run->grow_kv_in_place;
  }
  return control;
}

}  // namespace

absl::StatusOr<std::vector<Value>> SessionImpl::RunValues(
    const std::vector<std::pair<std::string, Value>>& feeds, const RunOptions* run,
    const std::vector<bool>& wanted) const {
  auto by_index = BindFeeds(feeds);
  if (!by_index.ok()) return by_index.status();
  auto request = Request(run, wanted);
  if (!request.ok()) return request.status();
  const RunControl control = ControlOf(run);
  auto results = GuardExceptions([&] { return plan_->Execute(*by_index, nullptr, control, *request); });
  for (const Tensor& t : gather_only_tables_) ReleaseMappedPages(t);  // does nothing unless mapped
  return results;
}

absl::StatusOr<std::vector<std::pair<std::string, Value>>> SessionImpl::FeedValues(const std::vector<Feed>& feeds) {
  std::vector<std::pair<std::string, Value>> values;
  values.reserve(feeds.size());
  for (const auto& [name, t] : feeds) {
    if (!t.defined()) return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is an empty tensor handle"));
    values.emplace_back(name, Value::FromTensor(t));
  }
  return values;
}

namespace {

// One flag per entry of `infos` (IOInfo or ValueInfo), set for each of `names` (none: empty); an
// unknown name is an InvalidArgument naming `what`.
template <typename Info>
absl::StatusOr<std::vector<bool>> FlagsByName(const std::vector<Info>& infos, const std::vector<std::string>& names,
                                              const char* what) {
  std::vector<bool> flags;
  if (!names.empty()) flags.assign(infos.size(), false);
  for (const std::string& name : names) {
    size_t i = 0;
    while (i < infos.size() && infos[i].name != name) ++i;
    if (i == infos.size()) return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "'"));
    flags[i] = true;
  }
  return flags;
}

}  // namespace

absl::StatusOr<ExecutionPlan::RunRequest> SessionImpl::Request(const RunOptions* run, const std::vector<bool>& wanted) const {
  ExecutionPlan::RunRequest request;
  request.wanted = wanted;
  if (run == nullptr) return request;
  auto last_row = FlagsByName(outputs_, run->last_row_outputs, "last_row_outputs: unknown output");
  if (!last_row.ok()) return last_row.status();
  request.last_row = std::move(*last_row);
  // Donated flags are per graph input (the plan's input index), initializer-backed ones included.
  auto donated = FlagsByName(graph_->inputs, run->donated_inputs, "donated_inputs: unknown input");
  if (!donated.ok()) return donated.status();
  request.donated = std::move(*donated);
  return request;
}

absl::Status SessionImpl::PickOutputs(const std::vector<std::string>& output_names, std::vector<size_t>* picked,
                                      std::vector<bool>* wanted) const {
  for (const std::string& name : output_names) {
    size_t i = 0;
    while (i < outputs_.size() && outputs_[i].name != name) ++i;
    if (i == outputs_.size()) return absl::InvalidArgumentError(absl::StrCat("unknown output '", name, "'"));
    picked->push_back(i);
  }
  if (!picked->empty()) {
    wanted->assign(outputs_.size(), false);
    for (size_t i : *picked) (*wanted)[i] = true;
  } else {
    picked->resize(outputs_.size());
    for (size_t i = 0; i < picked->size(); ++i) (*picked)[i] = i;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> SessionImpl::Picked(const std::vector<Value>& results, const std::vector<size_t>& picked) const {
  std::vector<Tensor> out;
  out.reserve(picked.size());
  for (size_t i : picked) {
    if (!results[i].is_tensor()) {
      return absl::InvalidArgumentError(absl::StrCat("output '", outputs_[i].name, "' is not a tensor; use RunValues"));
    }
    out.push_back(results[i].tensor);
  }
  return out;
}

absl::StatusOr<std::vector<Tensor>> SessionImpl::Run(const std::vector<Feed>& feeds,
                                                     const std::vector<std::string>& output_names,
                                                     const RunOptions* run) const {
  auto values = FeedValues(feeds);
  if (!values.ok()) return values.status();
  std::vector<size_t> picked;
  std::vector<bool> wanted;
  if (absl::Status s = PickOutputs(output_names, &picked, &wanted); !s.ok()) return s;
  auto results = RunValues(*values, run, wanted);
  if (!results.ok()) return results.status();
  return Picked(*results, picked);
}

absl::StatusOr<std::vector<std::vector<Tensor>>> SessionImpl::RunBatch(const std::vector<std::vector<Feed>>& feeds,
                                                                       const std::vector<std::string>& output_names,
                                                                       const RunOptions* run, LockstepCounts* counts) const {
  std::vector<size_t> picked;
  std::vector<bool> wanted;
  if (absl::Status s = PickOutputs(output_names, &picked, &wanted); !s.ok()) return s;
  std::vector<std::vector<std::pair<std::string, Value>>> values;
  std::vector<std::vector<const Value*>> bound;
  values.reserve(feeds.size());
  for (size_t i = 0; i < feeds.size(); ++i) {
    auto v = FeedValues(feeds[i]);
    if (!v.ok()) return v.status();
    values.push_back(std::move(*v));
    auto b = BindFeeds(values.back());
    if (!b.ok()) return absl::Status(b.status().code(), absl::StrCat("feed set ", i, ": ", b.status().message()));
    bound.push_back(std::move(*b));
  }
  auto request = Request(run, wanted);
  if (!request.ok()) return request.status();
  const RunControl control = ControlOf(run);
  auto results = GuardExceptions([&] { return plan_->ExecuteBatch(bound, control, *request, counts); });
  for (const Tensor& t : gather_only_tables_) ReleaseMappedPages(t);
  if (!results.ok()) return results.status();
  std::vector<std::vector<Tensor>> out;
  out.reserve(results->size());
  for (const std::vector<Value>& r : *results) {
    auto p = Picked(r, picked);
    if (!p.ok()) return p.status();
    out.push_back(std::move(*p));
  }
  return out;
}

// Public API.

Session::Session(std::unique_ptr<SessionImpl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

absl::StatusOr<std::unique_ptr<Session>> Session::Load(const std::string& path, const SessionOptions& options) {
  return GuardExceptions([&]() -> absl::StatusOr<std::unique_ptr<Session>> {
    auto model = LoadModelFromFile(path);
    if (!model.ok()) return model.status();
    auto impl = SessionImpl::Create(std::move(*model), options);
    if (!impl.ok()) {
      return absl::Status(impl.status().code(), absl::StrCat("model '", path, "': ", impl.status().message()));
    }
    return std::unique_ptr<Session>(new Session(std::move(*impl)));
  });
}


absl::StatusOr<std::unique_ptr<Session>> Session::LoadFromBuffer(const void* data, size_t size,
                                                                 const SessionOptions& options,
                                                                 const std::string& base_dir) {
  return GuardExceptions([&]() -> absl::StatusOr<std::unique_ptr<Session>> {
    auto model = LoadModelFromBuffer(data, size, base_dir);
    if (!model.ok()) return model.status();
    auto impl = SessionImpl::Create(std::move(*model), options);
    if (!impl.ok()) return impl.status();
    return std::unique_ptr<Session>(new Session(std::move(*impl)));
  });
}

const std::vector<IOInfo>& Session::inputs() const { return impl_->inputs(); }
const std::vector<IOInfo>& Session::outputs() const { return impl_->outputs(); }
const std::map<std::string, std::string>& Session::metadata() const { return impl_->model().metadata; }

absl::StatusOr<std::vector<Tensor>> Session::Run(const std::vector<Feed>& feeds,
                                                 const std::vector<std::string>& output_names) const {
  return GuardExceptions([&] { return impl_->Run(feeds, output_names); });
}

absl::StatusOr<std::vector<Tensor>> Session::Run(const std::vector<Feed>& feeds,
                                                 const std::vector<std::string>& output_names,
                                                 const RunOptions& run) const {
  return GuardExceptions([&] { return impl_->Run(feeds, output_names, &run); });
}

absl::StatusOr<std::vector<std::vector<Tensor>>> Session::RunBatch(const std::vector<std::vector<Feed>>& feeds,
                                                                   const std::vector<std::string>& output_names,
                                                                   const RunOptions& run) const {
  return GuardExceptions([&] { return impl_->RunBatch(feeds, output_names, &run); });
}

const QdqFusionSummary& Session::qdq_fusion() const { return impl_->qdq_fusion(); }
const RotaryLimit& Session::rotary_limit() const { return impl_->rotary_limit(); }
size_t Session::peak_intermediate_bytes() const { return impl_->allocator().peak_bytes(); }
void Session::ResetPeakIntermediateBytes() { impl_->allocator().ResetPeak(); }
void Session::KeepPooledBytes(size_t bytes) const { impl_->allocator().KeepCached(bytes); }

}  // namespace oneinfer
