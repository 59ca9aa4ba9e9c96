// Control flow: If, Loop, Scan. Bodies are compiled once at load; names they read from
// enclosing scopes are resolved by the engine through the OpContext passed to Run().
#include <algorithm>
#include <cstring>
#include <limits>

#include "ops/kernel.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

// Copies n elements from src[soff..] to dst[doff..] (strings by assignment).
// Reads a one-element bool tensor.
absl::StatusOr<bool> ReadCond(const OpContext& ctx, const Value* v, const char* what) {
  if (v == nullptr || !v->is_tensor() || v->tensor.dtype() != DType::kBool || v->tensor.num_elements() != 1) {
    return InvalidArgument(ctx, what, " must be a bool tensor with one element");
  }
  return v->tensor.data<bool>()[0];
}

Tensor BoolScalar(bool b) {
  Tensor t = Tensor::Empty(DType::kBool, {});
  t.data<bool>()[0] = b;
  return t;
}

// dtype and shape of one per-iteration scan output from the body's declared output type;
// used when there were no iterations. The shape is empty-with-unknown-dims if unknown.
absl::StatusOr<std::pair<DType, Shape>> DeclaredElem(const OpContext& ctx, const Graph& body, size_t out) {
  const TypeInfo* t = out < body.outputs.size() ? &body.outputs[out].type : nullptr;
  if (t == nullptr || t->kind != TypeInfo::Kind::kTensor || t->elem == DType::kUndefined) {
    return InvalidArgument(ctx, "no iterations ran and the element type of scan output '",
                           out < body.outputs.size() ? body.outputs[out].name : "?", "' is not declared");
  }
  Shape s;
  if (t->shape) {
    for (const Dim& d : *t->shape) s.push_back(d.is_fixed() ? d.value : 0);
  }
  return std::make_pair(t->elem, s);
}

// Writes items[t] (all of one shape) into dst so that dst's dim `axis` indexes the items;
// dst's dim `axis` has length len >= items.size(), base is an element offset into dst.
absl::Status StackInto(const OpContext& ctx, const std::vector<Tensor>& items, size_t axis, int64_t len,
                       bool reverse, Tensor& dst, int64_t base) {
  if (items.empty()) return absl::OkStatus();
  const Shape& s = items[0].shape();
  const int64_t outer = Prod(s, 0, axis), inner = Prod(s, axis, s.size());
  for (size_t t = 0; t < items.size(); ++t) {
    const int64_t pos = reverse ? len - 1 - static_cast<int64_t>(t) : static_cast<int64_t>(t);
    for (int64_t o = 0; o < outer; ++o) CopyElems(dst, base + (o * len + pos) * inner, items[t], o * inner, inner);
  }
  (void)ctx;
  return absl::OkStatus();
}

// Checks that the per-iteration outputs agree in dtype and shape.
absl::Status CheckUniform(const OpContext& ctx, const std::vector<Tensor>& items, const std::string& name) {
  for (const Tensor& t : items) {
    if (t.dtype() != items[0].dtype() || t.shape() != items[0].shape()) {
      return InvalidArgument(ctx, "scan output '", name, "' changes from ", DTypeName(items[0].dtype()),
                             ShapeToString(items[0].shape()), " to ", DTypeName(t.dtype()), ShapeToString(t.shape()),
                             " between iterations");
    }
    if (IsPacked(t.dtype())) return InvalidArgument(ctx, "scan output '", name, "' has a 4-bit type");
  }
  return absl::OkStatus();
}

// Allocates output `out` holding items stacked along `axis` (into a new dim); with no items
// the shape comes from the body's declared output type.
absl::Status EmitStacked(OpContext& ctx, size_t out, const Graph& body, size_t body_out,
                         const std::vector<Tensor>& items, int64_t axis_attr, bool reverse) {
  DType dt;
  Shape elem;
  if (items.empty()) {
    auto d = DeclaredElem(ctx, body, body_out);
    if (!d.ok()) return d.status();
    dt = d->first;
    elem = d->second;
  } else {
    auto st = CheckUniform(ctx, items, body.outputs[body_out].name);
    if (!st.ok()) return st;
    dt = items[0].dtype();
    elem = items[0].shape();
  }
  auto axis = NormalizeAxis(axis_attr, static_cast<int64_t>(elem.size()) + 1);
  if (!axis.ok()) return InvalidArgument(ctx, "scan output axis ", axis_attr, " is out of range for rank ", elem.size() + 1);
  Shape shape = elem;
  shape.insert(shape.begin() + *axis, static_cast<int64_t>(items.size()));
  Tensor& dst = ctx.AllocateOutput(out, dt, shape);
  return StackInto(ctx, items, static_cast<size_t>(*axis), static_cast<int64_t>(items.size()), reverse, dst, 0);
}

// Slice t of `in` along `axis` (the axis removed). A view when the slice is contiguous.
Tensor SliceAt(const Tensor& in, size_t axis, int64_t t) {
  Shape s = in.shape();
  const int64_t len = s[axis], outer = Prod(s, 0, axis), inner = Prod(s, axis + 1, s.size());
  s.erase(s.begin() + static_cast<std::ptrdiff_t>(axis));
  if (outer == 1 && in.holder() != nullptr) {
    const size_t es = DTypeSize(in.dtype());
    void* p = const_cast<char*>(static_cast<const char*>(in.raw_data())) + t * inner * static_cast<int64_t>(es);
    return Tensor::Wrap(in.dtype(), s, in.holder(), p);
  }
  Tensor out = Tensor::Empty(in.dtype(), s);
  for (int64_t o = 0; o < outer; ++o) CopyElems(out, o * inner, in, (o * len + t) * inner, inner);
  return out;
}

// ---------------------------------------------------------------------------------------- If

class IfKernel : public OpKernel {
 public:
  absl::Status Init(const KernelInit& init) {
    const Node& n = init.node();
    const Attribute* th = n.FindAttr("then_branch");
    const Attribute* el = n.FindAttr("else_branch");
    if (!th || !th->g || !el || !el->g) return absl::InvalidArgumentError("If needs then_branch and else_branch graphs");
    auto a = init.CompileSubgraph(*th->g);
    if (!a.ok()) return a.status();
    auto b = init.CompileSubgraph(*el->g);
    if (!b.ok()) return b.status();
    then_ = std::move(*a);
    else_ = std::move(*b);
    for (const auto* g : {&then_->graph(), &else_->graph()}) {
      if (g->outputs.size() < n.outputs.size()) {
        return absl::InvalidArgumentError(absl::StrCat("branch '", g->name, "' has ", g->outputs.size(),
                                                       " outputs, the node has ", n.outputs.size()));
      }
    }
    return absl::OkStatus();
  }
  absl::Status Compute(OpContext& ctx) const override {
    auto c = ReadCond(ctx, ctx.input_value(0), "cond");
    if (!c.ok()) return c.status();
    const SubgraphRunner& br = *c ? *then_ : *else_;
    auto outs = br.Run(ctx, {});
    if (!outs.ok()) return outs.status();
    if (outs->size() < ctx.num_outputs()) return InvalidArgument(ctx, "branch returned too few outputs");
    for (size_t i = 0; i < ctx.num_outputs(); ++i) {
      if (ctx.has_output(i)) ctx.SetOutputValue(i, std::move((*outs)[i]));
    }
    return absl::OkStatus();
  }
  absl::Status PrepareWeights(ThreadPool*) const override {
    if (absl::Status s = then_->PrepareWeights(); !s.ok()) return s;
    return else_->PrepareWeights();
  }

 private:
  std::unique_ptr<SubgraphRunner> then_, else_;
};

// -------------------------------------------------------------------------------------- Loop

class LoopKernel : public OpKernel {
 public:
  absl::Status Init(const KernelInit& init) {
    const Node& n = init.node();
    const Attribute* b = n.FindAttr("body");
    if (!b || !b->g) return absl::InvalidArgumentError("Loop needs a body graph");
    auto r = init.CompileSubgraph(*b->g);
    if (!r.ok()) return r.status();
    body_ = std::move(*r);
    max_scan_bytes_ = init.config().max_tensor_bytes;
    const Graph& g = body_->graph();
    const size_t carried = n.inputs.size() < 2 ? 0 : n.inputs.size() - 2;
    if (g.inputs.size() != carried + 2) {
      return absl::InvalidArgumentError(absl::StrCat("Loop body takes ", g.inputs.size(), " inputs, expected ",
                                                     carried + 2, " (iteration, cond and ", carried, " loop-carried)"));
    }
    if (g.outputs.size() < carried + 1 || n.outputs.size() > g.outputs.size() - 1) {
      return absl::InvalidArgumentError(absl::StrCat("Loop body has ", g.outputs.size(), " outputs; the node has ",
                                                     carried, " loop-carried inputs and ", n.outputs.size(), " outputs"));
    }
    return absl::OkStatus();
  }

  absl::Status Compute(OpContext& ctx) const override {
    const Graph& g = body_->graph();
    const size_t carried = ctx.num_inputs() < 2 ? 0 : ctx.num_inputs() - 2;
    const size_t scans = g.outputs.size() - 1 - carried;
    int64_t trips = std::numeric_limits<int64_t>::max();
    if (ctx.has_input(0)) {
      const Value* m = ctx.input_value(0);
      if (m == nullptr || !m->is_tensor() || m->tensor.num_elements() != 1 ||
          (m->tensor.dtype() != DType::kInt64 && m->tensor.dtype() != DType::kInt32)) {
        return InvalidArgument(ctx, "M must be an int64 tensor with one element");
      }
      trips = m->tensor.dtype() == DType::kInt64 ? m->tensor.data<int64_t>()[0] : m->tensor.data<int32_t>()[0];
      if (trips < 0) return InvalidArgument(ctx, "M is negative (", trips, ")");
    }
    const bool has_cond = ctx.has_input(1);
    bool cond = true;
    Tensor cond_t = BoolScalar(true);
    if (has_cond) {
      auto c = ReadCond(ctx, ctx.input_value(1), "cond");
      if (!c.ok()) return c.status();
      cond = *c;
      cond_t = ctx.input_value(1)->tensor;
    }
    std::vector<Value> state(carried);
    for (size_t i = 0; i < carried; ++i) {
      const Value* v = ctx.input_value(i + 2);
      if (v == nullptr) return InvalidArgument(ctx, "loop-carried input ", i, " is missing");
      state[i] = *v;
    }
    std::vector<std::vector<Tensor>> items(scans);
    // Bytes the stacked scan outputs will take (a Tensor handle at least per item): a trip count
    // from data must not grow them past one tensor's limit.
    std::vector<size_t> scan_bytes(scans, 0);
    for (int64_t it = 0; it < trips && cond; ++it) {
      // A body without nodes never reaches the plan's own check, so the loop checks itself.
      if (absl::Status stop = ctx.CheckCancel(); !stop.ok()) return stop;
      std::vector<Value> in;
      in.reserve(carried + 2);
      Tensor iter = Tensor::Empty(DType::kInt64, {});
      iter.data<int64_t>()[0] = it;
      in.push_back(Value::FromTensor(iter));
      in.push_back(Value::FromTensor(cond_t));
      for (Value& v : state) in.push_back(std::move(v));
      auto outs = body_->Run(ctx, std::move(in));
      if (!outs.ok()) return outs.status();
      if (outs->size() != g.outputs.size()) return InvalidArgument(ctx, "body returned ", outs->size(), " outputs");
      // Without a cond input the loop is a plain for loop: the body's cond is ignored.
      if (has_cond) {
        auto c = ReadCond(ctx, &(*outs)[0], "the body's cond output");
        if (!c.ok()) return c.status();
        cond = *c;
        cond_t = (*outs)[0].tensor;
      }
      for (size_t i = 0; i < carried; ++i) state[i] = std::move((*outs)[1 + i]);
      for (size_t k = 0; k < scans; ++k) {
        Value& v = (*outs)[1 + carried + k];
        if (!v.is_tensor()) return InvalidArgument(ctx, "scan output '", g.outputs[1 + carried + k].name, "' is not a tensor");
        scan_bytes[k] += std::max(v.tensor.byte_size(), sizeof(Tensor));
        if (max_scan_bytes_ > 0 && scan_bytes[k] > max_scan_bytes_) {
          return absl::ResourceExhaustedError(absl::StrCat(
              ctx.node().Describe(), ": scan output '", g.outputs[1 + carried + k].name, "' passes ", max_scan_bytes_,
              " bytes (the limit for one tensor, SessionOptions::max_tensor_bytes) after ", it + 1, " iterations of ",
              DTypeName(v.tensor.dtype()), ShapeToString(v.tensor.shape())));
        }
        items[k].push_back(std::move(v.tensor));
      }
    }
    for (size_t i = 0; i < carried && i < ctx.num_outputs(); ++i) {
      if (ctx.has_output(i)) ctx.SetOutputValue(i, std::move(state[i]));
    }
    for (size_t k = 0; k < scans && carried + k < ctx.num_outputs(); ++k) {
      if (!ctx.has_output(carried + k)) continue;
      auto st = EmitStacked(ctx, carried + k, g, 1 + carried + k, items[k], 0, false);
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }
  absl::Status PrepareWeights(ThreadPool*) const override { return body_->PrepareWeights(); }

 private:
  std::unique_ptr<SubgraphRunner> body_;
  size_t max_scan_bytes_ = 0;  // KernelConfig::max_tensor_bytes; 0 = no limit
};

// -------------------------------------------------------------------------------------- Scan

class ScanKernel : public OpKernel {
 public:
  absl::Status Init(const KernelInit& init) {
    const Node& n = init.node();
    v8_ = init.opset() < 9;
    const Attribute* b = n.FindAttr("body");
    if (!b || !b->g) return absl::InvalidArgumentError("Scan needs a body graph");
    auto r = init.CompileSubgraph(*b->g);
    if (!r.ok()) return r.status();
    body_ = std::move(*r);
    const Graph& g = body_->graph();
    m_ = n.GetInt("num_scan_inputs", -1);
    const size_t first = v8_ ? 1 : 0;
    const size_t total = n.inputs.size() > first ? n.inputs.size() - first : 0;
    if (m_ < 1 || static_cast<size_t>(m_) > total) {
      return absl::InvalidArgumentError(absl::StrCat("num_scan_inputs ", m_, " is invalid for ", total, " inputs"));
    }
    n_ = total - static_cast<size_t>(m_);
    if (g.inputs.size() != total) {
      return absl::InvalidArgumentError(absl::StrCat("Scan body takes ", g.inputs.size(), " inputs, expected ", total));
    }
    if (g.outputs.size() < n_ || n.outputs.size() > g.outputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("Scan body has ", g.outputs.size(), " outputs, the node has ",
                                                     n_, " states and ", n.outputs.size(), " outputs"));
    }
    k_ = g.outputs.size() - n_;
    const size_t m = static_cast<size_t>(m_);
    auto get = [&](const char* name, size_t count, std::vector<int64_t>& dst, bool dirs) -> absl::Status {
      dst = n.GetInts(name, std::vector<int64_t>(count, 0));
      if (dst.size() != count) {
        return absl::InvalidArgumentError(absl::StrCat(name, " has ", dst.size(), " entries, expected ", count));
      }
      for (int64_t d : dst) {
        if (dirs && d != 0 && d != 1) return absl::InvalidArgumentError(absl::StrCat(name, " value ", d, " is not 0 or 1"));
      }
      return absl::OkStatus();
    };
    absl::Status st;
    if (v8_) {
      st = get("directions", m, in_dirs_, true);
      in_axes_.assign(m, 0);
      out_axes_.assign(k_, 0);
      out_dirs_.assign(k_, 0);
    } else {
      st.Update(get("scan_input_axes", m, in_axes_, false));
      st.Update(get("scan_input_directions", m, in_dirs_, true));
      st.Update(get("scan_output_axes", k_, out_axes_, false));
      st.Update(get("scan_output_directions", k_, out_dirs_, true));
    }
    return st;
  }

  absl::Status Compute(OpContext& ctx) const override { return v8_ ? Compute8(ctx) : Compute9(ctx); }
  absl::Status PrepareWeights(ThreadPool*) const override { return body_->PrepareWeights(); }

 private:
  // Runs the body over `len` iterations; scans[j] is sliced along in_axes[j].
  absl::Status Iterate(OpContext& ctx, std::vector<Value>& state, const std::vector<Tensor>& scans,
                       const std::vector<size_t>& axes, int64_t len, std::vector<std::vector<Tensor>>& items) const {
    const Graph& g = body_->graph();
    items.assign(k_, {});
    for (int64_t t = 0; t < len; ++t) {
      if (absl::Status stop = ctx.CheckCancel(); !stop.ok()) return stop;
      std::vector<Value> in;
      in.reserve(n_ + scans.size());
      for (const Value& v : state) in.push_back(v);
      for (size_t j = 0; j < scans.size(); ++j) {
        const int64_t pos = in_dirs_[j] ? len - 1 - t : t;
        in.push_back(Value::FromTensor(SliceAt(scans[j], axes[j], pos)));
      }
      auto outs = body_->Run(ctx, std::move(in));
      if (!outs.ok()) return outs.status();
      if (outs->size() != g.outputs.size()) return InvalidArgument(ctx, "body returned ", outs->size(), " outputs");
      for (size_t i = 0; i < n_; ++i) state[i] = std::move((*outs)[i]);
      for (size_t k = 0; k < k_; ++k) {
        Value& v = (*outs)[n_ + k];
        if (!v.is_tensor()) return InvalidArgument(ctx, "scan output '", g.outputs[n_ + k].name, "' is not a tensor");
        items[k].push_back(std::move(v.tensor));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Compute9(OpContext& ctx) const {
    std::vector<Value> state(n_);
    for (size_t i = 0; i < n_; ++i) {
      const Value* v = ctx.input_value(i);
      if (v == nullptr || !v->is_tensor()) return InvalidArgument(ctx, "state input ", i, " must be a tensor");
      state[i] = *v;
    }
    std::vector<Tensor> scans;
    std::vector<size_t> axes;
    int64_t len = -1;
    for (size_t j = 0; j < static_cast<size_t>(m_); ++j) {
      const Value* v = ctx.input_value(n_ + j);
      if (v == nullptr || !v->is_tensor()) return InvalidArgument(ctx, "scan input ", j, " must be a tensor");
      const Tensor& t = v->tensor;
      if (IsPacked(t.dtype())) return InvalidArgument(ctx, "scan input ", j, " has a 4-bit type");
      auto a = NormalizeAxis(in_axes_[j], t.rank());
      if (!a.ok()) return InvalidArgument(ctx, "scan_input_axes[", j, "] = ", in_axes_[j], " is out of range for rank ", t.rank());
      const int64_t l = t.dim(*a);
      if (len >= 0 && l != len) return InvalidArgument(ctx, "scan inputs disagree on the sequence length (", len, " vs ", l, ")");
      len = l;
      scans.push_back(t);
      axes.push_back(static_cast<size_t>(*a));
    }
    std::vector<std::vector<Tensor>> items;
    auto st = Iterate(ctx, state, scans, axes, len, items);
    if (!st.ok()) return st;
    for (size_t i = 0; i < n_ && i < ctx.num_outputs(); ++i) {
      if (ctx.has_output(i)) ctx.SetOutputValue(i, std::move(state[i]));
    }
    for (size_t k = 0; k < k_ && n_ + k < ctx.num_outputs(); ++k) {
      if (!ctx.has_output(n_ + k)) continue;
      st = EmitStacked(ctx, n_ + k, body_->graph(), n_ + k, items[k], out_axes_[k], out_dirs_[k] != 0);
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }

  // Opset 8: every state and scan input has a leading batch dim; scan inputs are [batch, seq, ...].
  absl::Status Compute8(OpContext& ctx) const {
    const size_t m = static_cast<size_t>(m_);
    int64_t batch = -1, max_len = -1;
    auto check_batch = [&](const Tensor& t, const char* what, size_t i, int min_rank) -> absl::Status {
      if (t.rank() < min_rank) return InvalidArgument(ctx, what, " ", i, " must have rank >= ", min_rank);
      if (IsPacked(t.dtype())) return InvalidArgument(ctx, what, " ", i, " has a 4-bit type");
      if (batch >= 0 && t.dim(0) != batch) return InvalidArgument(ctx, what, " ", i, " has batch ", t.dim(0), ", expected ", batch);
      batch = t.dim(0);
      return absl::OkStatus();
    };
    std::vector<Tensor> states, scans;
    for (size_t i = 0; i < n_ + m; ++i) {
      const Value* v = ctx.input_value(1 + i);
      if (v == nullptr || !v->is_tensor()) return InvalidArgument(ctx, "input ", 1 + i, " must be a tensor");
      auto st = check_batch(v->tensor, i < n_ ? "state input" : "scan input", i < n_ ? i : i - n_, i < n_ ? 1 : 2);
      if (!st.ok()) return st;
      if (i < n_) states.push_back(v->tensor);
      else {
        scans.push_back(v->tensor);
        if (max_len >= 0 && v->tensor.dim(1) != max_len) return InvalidArgument(ctx, "scan inputs disagree on the sequence length");
        max_len = v->tensor.dim(1);
      }
    }
    std::vector<int64_t> lens(static_cast<size_t>(batch), max_len);
    if (ctx.has_input(0)) {
      const Value* v = ctx.input_value(0);
      if (v == nullptr || !v->is_tensor() || (v->tensor.dtype() != DType::kInt64 && v->tensor.dtype() != DType::kInt32)) {
        return InvalidArgument(ctx, "sequence_lens must be an int tensor");
      }
      auto l = ReadInts(v->tensor);
      if (!l.ok() || static_cast<int64_t>(l->size()) != batch) return InvalidArgument(ctx, "sequence_lens must have ", batch, " entries");
      for (int64_t x : *l) if (x < 0 || x > max_len) return InvalidArgument(ctx, "sequence_lens value ", x, " is outside [0, ", max_len, "]");
      lens = *l;
    }
    std::vector<std::vector<Tensor>> final_states(n_);       // per state, per batch
    std::vector<std::vector<std::vector<Tensor>>> per_batch;  // per batch, per output, per iteration
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Value> state;
      for (const Tensor& s : states) state.push_back(Value::FromTensor(SliceAt(s, 0, b)));
      std::vector<Tensor> sc;
      for (const Tensor& s : scans) sc.push_back(SliceAt(s, 0, b));
      std::vector<std::vector<Tensor>> items;
      auto st = Iterate(ctx, state, sc, std::vector<size_t>(m, 0), lens[static_cast<size_t>(b)], items);
      if (!st.ok()) return st;
      for (size_t i = 0; i < n_; ++i) {
        if (!state[i].is_tensor()) return InvalidArgument(ctx, "state output ", i, " is not a tensor");
        final_states[i].push_back(state[i].tensor);
      }
      per_batch.push_back(std::move(items));
    }
    const Graph& g = body_->graph();
    for (size_t i = 0; i < n_ && i < ctx.num_outputs(); ++i) {
      if (!ctx.has_output(i)) continue;
      std::vector<Tensor>& fs = final_states[i];
      if (fs.empty()) {  // batch 0: keep the input's shape
        ctx.SetOutput(i, states[i]);
        continue;
      }
      auto st = CheckUniform(ctx, fs, g.outputs[i].name);
      if (!st.ok()) return st;
      Shape shape = fs[0].shape();
      shape.insert(shape.begin(), batch);
      Tensor& dst = ctx.AllocateOutput(i, fs[0].dtype(), shape);
      st = StackInto(ctx, fs, 0, batch, false, dst, 0);
      if (!st.ok()) return st;
    }
    for (size_t k = 0; k < k_ && n_ + k < ctx.num_outputs(); ++k) {
      if (!ctx.has_output(n_ + k)) continue;
      std::vector<Tensor> all;
      for (auto& pb : per_batch) all.insert(all.end(), pb[k].begin(), pb[k].end());
      DType dt;
      Shape elem;
      if (all.empty()) {
        auto d = DeclaredElem(ctx, g, n_ + k);
        if (!d.ok()) return d.status();
        dt = d->first;
        elem = d->second;
      } else {
        auto st = CheckUniform(ctx, all, g.outputs[n_ + k].name);
        if (!st.ok()) return st;
        dt = all[0].dtype();
        elem = all[0].shape();
      }
      Shape shape = elem;
      shape.insert(shape.begin(), {batch, max_len});
      Tensor& dst = ctx.AllocateOutput(n_ + k, dt, shape);
      const int64_t block = max_len * NumElements(elem);
      for (int64_t b = 0; b < batch; ++b) {
        auto st = StackInto(ctx, per_batch[static_cast<size_t>(b)][k], 0, max_len, false, dst, b * block);
        if (!st.ok()) return st;
      }
    }
    return absl::OkStatus();
  }

  bool v8_ = false;
  int64_t m_ = 0;
  size_t n_ = 0, k_ = 0;
  std::vector<int64_t> in_axes_, in_dirs_, out_axes_, out_dirs_;
  std::unique_ptr<SubgraphRunner> body_;
};

template <typename K>
KernelFactory Factory() {
  return [](const KernelInit& init) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    auto k = std::make_unique<K>();
    auto st = k->Init(init);
    if (!st.ok()) return st;
    return std::unique_ptr<OpKernel>(std::move(k));
  };
}

}  // namespace

void RegisterControlFlowOps(KernelRegistry& r) {
  AddVersions(r, "If", {1, 11, 13, 16, 19, 21, 23}, Factory<IfKernel>(), /*non_tensors=*/true);
  AddVersions(r, "Loop", {1, 11, 13, 16, 19, 21, 23}, Factory<LoopKernel>(), /*non_tensors=*/true);
  AddVersions(r, "Scan", {8, 9, 11, 16, 19, 21, 23}, Factory<ScanKernel>(), /*non_tensors=*/true);
}

}  // namespace oneinfer
