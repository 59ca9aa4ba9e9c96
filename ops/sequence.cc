// Sequence and optional operators. A sequence is Value::Kind::kSequence; an empty optional is
// Value::Kind::kNone and a present optional is the contained value itself.
#include <cstring>

#include "ops/kernel.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

absl::StatusOr<const Value*> SeqInput(const OpContext& ctx, size_t i) {
  const Value* v = ctx.input_value(i);
  if (v == nullptr || !v->is_sequence()) return InvalidArgument(ctx, "input ", i, " must be a sequence");
  return v;
}

absl::StatusOr<const Tensor*> TensorInput(const OpContext& ctx, size_t i) {
  const Value* v = ctx.input_value(i);
  if (v == nullptr || !v->is_tensor()) return InvalidArgument(ctx, "input ", i, " must be a tensor");
  return &v->tensor;
}

// Reads a position input (int32/int64 scalar or one-element tensor) and checks it against
// [-n, n - 1] (or [-n, n] when `inclusive_end`); returns it normalised.
absl::StatusOr<int64_t> ReadPosition(const OpContext& ctx, size_t i, int64_t n, bool inclusive_end) {
  auto t = TensorInput(ctx, i);
  if (!t.ok()) return t.status();
  if (((*t)->dtype() != DType::kInt64 && (*t)->dtype() != DType::kInt32) || (*t)->num_elements() != 1) {
    return InvalidArgument(ctx, "position must be an int32/int64 scalar");
  }
  auto v = ReadInts(**t);
  if (!v.ok()) return v.status();
  int64_t p = (*v)[0];
  const int64_t hi = inclusive_end ? n : n - 1;
  if (p < -n || p > hi) return InvalidArgument(ctx, "position ", p, " is out of range for a sequence of length ", n);
  return p < 0 ? p + n : p;
}

absl::Status SequenceEmpty(OpContext& ctx) {
  const int64_t dt = ctx.node().GetInt("dtype", static_cast<int64_t>(DType::kFloat32));
  if (DTypeSize(static_cast<DType>(dt)) == 0) return InvalidArgument(ctx, "dtype ", dt, " is not a tensor element type");
  ctx.SetOutputValue(0, Value::FromSequence({}, static_cast<DType>(dt)));
  return absl::OkStatus();
}

absl::Status SequenceConstruct(OpContext& ctx) {
  std::vector<Tensor> items;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    auto t = TensorInput(ctx, i);
    if (!t.ok()) return t.status();
    if (!items.empty() && (*t)->dtype() != items[0].dtype()) {
      return InvalidArgument(ctx, "inputs mix ", DTypeName(items[0].dtype()), " and ", DTypeName((*t)->dtype()));
    }
    items.push_back(**t);
  }
  if (items.empty()) return InvalidArgument(ctx, "needs at least one input");
  const DType dt = items[0].dtype();
  ctx.SetOutputValue(0, Value::FromSequence(std::move(items), dt));
  return absl::OkStatus();
}

absl::Status SequenceInsert(OpContext& ctx) {
  auto s = SeqInput(ctx, 0);
  if (!s.ok()) return s.status();
  auto t = TensorInput(ctx, 1);
  if (!t.ok()) return t.status();
  const Value& seq = **s;
  DType dt = seq.seq_dtype;
  if (dt == DType::kUndefined && !seq.sequence.empty()) dt = seq.sequence[0].dtype();
  if (dt != DType::kUndefined && dt != (*t)->dtype()) {
    return InvalidArgument(ctx, "cannot insert a ", DTypeName((*t)->dtype()), " tensor into a sequence of ", DTypeName(dt));
  }
  const int64_t n = static_cast<int64_t>(seq.sequence.size());
  int64_t pos = n;
  if (ctx.has_input(2)) {
    auto p = ReadPosition(ctx, 2, n, true);
    if (!p.ok()) return p.status();
    pos = *p;
  }
  std::vector<Tensor> items = seq.sequence;  // copies share storage; the input stays untouched
  items.insert(items.begin() + pos, **t);
  ctx.SetOutputValue(0, Value::FromSequence(std::move(items), (*t)->dtype()));
  return absl::OkStatus();
}

absl::Status SequenceAt(OpContext& ctx) {
  auto s = SeqInput(ctx, 0);
  if (!s.ok()) return s.status();
  auto p = ReadPosition(ctx, 1, static_cast<int64_t>((*s)->sequence.size()), false);
  if (!p.ok()) return p.status();
  ctx.SetOutput(0, (*s)->sequence[static_cast<size_t>(*p)]);
  return absl::OkStatus();
}

absl::Status SequenceErase(OpContext& ctx) {
  auto s = SeqInput(ctx, 0);
  if (!s.ok()) return s.status();
  const int64_t n = static_cast<int64_t>((*s)->sequence.size());
  if (n == 0) return InvalidArgument(ctx, "cannot erase from an empty sequence");
  int64_t pos = n - 1;
  if (ctx.has_input(1)) {
    auto p = ReadPosition(ctx, 1, n, false);
    if (!p.ok()) return p.status();
    pos = *p;
  }
  std::vector<Tensor> items = (*s)->sequence;
  items.erase(items.begin() + pos);
  ctx.SetOutputValue(0, Value::FromSequence(std::move(items), (*s)->seq_dtype));
  return absl::OkStatus();
}

absl::Status SequenceLength(OpContext& ctx) {
  auto s = SeqInput(ctx, 0);
  if (!s.ok()) return s.status();
  ctx.AllocateOutput(0, DType::kInt64, {}).data<int64_t>()[0] = static_cast<int64_t>((*s)->sequence.size());
  return absl::OkStatus();
}

absl::Status SplitToSequence(OpContext& ctx) {
  auto in = TensorInput(ctx, 0);
  if (!in.ok()) return in.status();
  const Tensor& x = **in;
  if (IsPacked(x.dtype())) return InvalidArgument(ctx, "4-bit inputs are not supported");
  if (x.rank() == 0) return InvalidArgument(ctx, "input must have rank >= 1");
  auto ax = NormalizeAxis(ctx.node().GetInt("axis", 0), x.rank());
  if (!ax.ok()) return InvalidArgument(ctx, "axis ", ctx.node().GetInt("axis", 0), " is out of range for rank ", x.rank());
  const size_t axis = static_cast<size_t>(*ax);
  const int64_t len = x.dim(*ax);
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (ctx.has_input(1)) {
    auto st = TensorInput(ctx, 1);
    if (!st.ok()) return st.status();
    const Tensor& sp = **st;
    if (sp.dtype() != DType::kInt64 && sp.dtype() != DType::kInt32) return InvalidArgument(ctx, "split must be int32/int64");
    if (sp.rank() > 1) return InvalidArgument(ctx, "split must be a scalar or 1-D");
    auto v = ReadInts(sp);
    if (!v.ok()) return v.status();
    if (sp.rank() == 0) {
      const int64_t c = (*v)[0];
      if (c <= 0) return InvalidArgument(ctx, "split ", c, " must be positive");
      for (int64_t at = 0; at < len; at += c) sizes.push_back(std::min(c, len - at));
    } else {
      int64_t sum = 0;
      for (int64_t c : *v) {
        if (c < 0) return InvalidArgument(ctx, "split sizes must be >= 0, got ", c);
        // Checked: sizes from data whose sum wraps to the dim must not pass for it.
        if (__builtin_add_overflow(sum, c, &sum)) return InvalidArgument(ctx, "split sizes overflow 64 bits");
      }
      if (sum != len) return InvalidArgument(ctx, "split sizes sum to ", sum, ", dim ", axis, " is ", len);
      sizes = *v;
    }
  } else {
    sizes.assign(static_cast<size_t>(len), 1);
    squeeze = ctx.node().GetInt("keepdims", 1) == 0;
  }
  const Shape& s = x.shape();
  const int64_t outer = Prod(s, 0, axis), inner = Prod(s, axis + 1, s.size());
  std::vector<Tensor> items;
  int64_t start = 0;
  for (int64_t c : sizes) {
    Shape ps = s;
    ps[axis] = c;
    Tensor piece = ctx.AllocateTemp(x.dtype(), ps);
    for (int64_t o = 0; o < outer; ++o) CopyElems(piece, o * c * inner, x, (o * len + start) * inner, c * inner);
    if (squeeze) ps.erase(ps.begin() + static_cast<std::ptrdiff_t>(axis));
    items.push_back(squeeze ? piece.Reshaped(ps) : piece);
    start += c;
  }
  ctx.SetOutputValue(0, Value::FromSequence(std::move(items), x.dtype()));
  return absl::OkStatus();
}

absl::Status ConcatFromSequence(OpContext& ctx) {
  auto s = SeqInput(ctx, 0);
  if (!s.ok()) return s.status();
  const std::vector<Tensor>& seq = (*s)->sequence;
  if (seq.empty()) return InvalidArgument(ctx, "cannot concatenate an empty sequence");
  if (!ctx.node().HasAttr("axis")) return InvalidArgument(ctx, "the axis attribute is required");
  const int64_t axis_attr = ctx.node().GetInt("axis", 0);
  const bool new_axis = ctx.node().GetInt("new_axis", 0) == 1;
  const Tensor& first = seq[0];
  if (IsPacked(first.dtype())) return InvalidArgument(ctx, "4-bit inputs are not supported");
  const int64_t rank = first.rank() + (new_axis ? 1 : 0);
  if (rank == 0) return InvalidArgument(ctx, "cannot concatenate scalars without new_axis");
  auto ax = NormalizeAxis(axis_attr, rank);
  if (!ax.ok()) return InvalidArgument(ctx, "axis ", axis_attr, " is out of range for rank ", rank);
  const size_t axis = static_cast<size_t>(*ax);
  // Each item viewed with the concat axis present.
  std::vector<Shape> shapes;
  for (size_t i = 0; i < seq.size(); ++i) {
    const Tensor& t = seq[i];
    // Checked before the insert below, which is undefined past a shorter item's end (fuzz_model).
    if (t.rank() != first.rank()) {
      return InvalidArgument(ctx, "item ", i, " has shape ", ShapeToString(t.shape()), ", incompatible with ",
                             ShapeToString(first.shape()));
    }
    Shape sh = t.shape();
    if (new_axis) sh.insert(sh.begin() + static_cast<std::ptrdiff_t>(axis), 1);
    shapes.push_back(std::move(sh));
  }
  Shape out = shapes[0];
  out[axis] = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    if (seq[i].dtype() != first.dtype()) return InvalidArgument(ctx, "sequence mixes element types");
    bool ok = shapes[i].size() == out.size();
    for (size_t d = 0; ok && d < out.size(); ++d) ok = d == axis || shapes[i][d] == shapes[0][d];
    if (!ok) {
      return InvalidArgument(ctx, "item ", i, " has shape ", ShapeToString(seq[i].shape()), ", incompatible with ",
                             ShapeToString(first.shape()));
    }
    out[axis] += shapes[i][axis];
  }
  Tensor& dst = ctx.AllocateOutput(0, first.dtype(), out);
  const int64_t outer = Prod(out, 0, axis), inner = Prod(out, axis + 1, out.size());
  int64_t at = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    const int64_t block = shapes[i][axis] * inner;
    for (int64_t o = 0; o < outer; ++o) CopyElems(dst, o * out[axis] * inner + at, seq[i], o * block, block);
    at += block;
  }
  return absl::OkStatus();
}

// Optional(input) wraps its input; Optional() is the empty optional.
absl::Status OptionalOp(OpContext& ctx) {
  if (ctx.has_input(0)) {
    const Value* v = ctx.input_value(0);
    if (v == nullptr) return InvalidArgument(ctx, "input was not computed");
    ctx.SetOutputValue(0, *v);
  } else {
    ctx.SetOutputValue(0, Value::None());
  }
  return absl::OkStatus();
}

absl::Status OptionalHasElement(OpContext& ctx) {
  bool has = false;
  if (ctx.has_input(0)) {
    const Value* v = ctx.input_value(0);
    has = v != nullptr && !v->is_none();
  } else if (ctx.opset() < 18) {
    return InvalidArgument(ctx, "the input is required before opset 18");
  }
  ctx.AllocateOutput(0, DType::kBool, {}).data<bool>()[0] = has;
  return absl::OkStatus();
}

absl::Status OptionalGetElement(OpContext& ctx) {
  const Value* v = ctx.has_input(0) ? ctx.input_value(0) : nullptr;
  if (v == nullptr) return InvalidArgument(ctx, "the input is missing");
  if (v->is_none()) return InvalidArgument(ctx, "the optional input is empty");
  ctx.SetOutputValue(0, *v);
  return absl::OkStatus();
}

// SequenceMap: runs the body once per element of the input sequence.
class SequenceMapKernel : public OpKernel {
 public:
  static absl::StatusOr<std::unique_ptr<OpKernel>> Create(const KernelInit& init) {
    const Node& n = init.node();
    const Attribute* b = n.FindAttr("body");
    if (!b || !b->g) return absl::InvalidArgumentError("SequenceMap needs a body graph");
    auto k = std::make_unique<SequenceMapKernel>();
    auto r = init.CompileSubgraph(*b->g);
    if (!r.ok()) return r.status();
    k->body_ = std::move(*r);
    const Graph& g = k->body_->graph();
    if (g.inputs.size() != n.inputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("SequenceMap body takes ", g.inputs.size(), " inputs, the node has ",
                                                     n.inputs.size()));
    }
    if (g.outputs.size() < n.outputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("SequenceMap body has ", g.outputs.size(), " outputs, the node has ",
                                                     n.outputs.size()));
    }
    // Element types for outputs of an empty map.
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      DType dt = DType::kUndefined;
      const TypeInfo* ot = init.OutputType(i);
      if (ot && ot->kind == TypeInfo::Kind::kSequence && ot->inner && ot->inner->kind == TypeInfo::Kind::kTensor) {
        dt = ot->inner->elem;
      }
      if (dt == DType::kUndefined && g.outputs[i].type.kind == TypeInfo::Kind::kTensor) dt = g.outputs[i].type.elem;
      k->out_types_.push_back(dt);
    }
    return std::unique_ptr<OpKernel>(std::move(k));
  }

  absl::Status Compute(OpContext& ctx) const override {
    auto s = SeqInput(ctx, 0);
    if (!s.ok()) return s.status();
    const size_t n = (*s)->sequence.size();
    std::vector<const Value*> extra;
    for (size_t i = 1; i < ctx.num_inputs(); ++i) {
      const Value* v = ctx.input_value(i);
      if (v == nullptr || v->is_none()) return InvalidArgument(ctx, "input ", i, " is missing");
      if (v->is_sequence() && v->sequence.size() != n) {
        return InvalidArgument(ctx, "sequence input ", i, " has length ", v->sequence.size(), ", expected ", n);
      }
      extra.push_back(v);
    }
    std::vector<std::vector<Tensor>> outs(ctx.num_outputs());
    for (size_t e = 0; e < n; ++e) {
      std::vector<Value> in;
      in.push_back(Value::FromTensor((*s)->sequence[e]));
      for (const Value* v : extra) in.push_back(v->is_sequence() ? Value::FromTensor(v->sequence[e]) : *v);
      auto r = body_->Run(ctx, std::move(in));
      if (!r.ok()) return r.status();
      for (size_t k = 0; k < outs.size(); ++k) {
        if (k >= r->size() || !(*r)[k].is_tensor()) return InvalidArgument(ctx, "body output ", k, " is not a tensor");
        outs[k].push_back(std::move((*r)[k].tensor));
      }
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!ctx.has_output(k)) continue;
      const DType dt = outs[k].empty() ? out_types_[k] : outs[k][0].dtype();
      ctx.SetOutputValue(k, Value::FromSequence(std::move(outs[k]), dt));
    }
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<SubgraphRunner> body_;
  std::vector<DType> out_types_;
};

}  // namespace

void RegisterSequenceOps(KernelRegistry& r) {
  // Sequences and optionals are not tensors.
  auto add = [&](const char* op, std::initializer_list<int64_t> since, KernelFactory factory) {
    AddVersions(r, op, since, factory, /*non_tensors=*/true);
  };
  add("SequenceEmpty", {11}, MakeFnKernel(SequenceEmpty));
  add("SequenceConstruct", {11}, MakeFnKernel(SequenceConstruct));
  add("SequenceInsert", {11}, MakeFnKernel(SequenceInsert));
  add("SequenceAt", {11}, MakeFnKernel(SequenceAt));
  add("SequenceErase", {11}, MakeFnKernel(SequenceErase));
  add("SequenceLength", {11}, MakeFnKernel(SequenceLength));
  add("SplitToSequence", {11}, MakeFnKernel(SplitToSequence));
  add("ConcatFromSequence", {11}, MakeFnKernel(ConcatFromSequence));
  add("Optional", {15}, MakeFnKernel(OptionalOp));
  add("OptionalHasElement", {15, 18}, MakeFnKernel(OptionalHasElement));
  add("OptionalGetElement", {15, 18}, MakeFnKernel(OptionalGetElement));
  add("SequenceMap", {17}, SequenceMapKernel::Create);
}

}  // namespace oneinfer
