// Slicing and joining: Concat, Split, Slice, Expand, Tile, Pad.
//
// Data movement does not look at values, so the kernels dispatch on the element's storage unit
// (1/2/4/8 bytes or std::string) through VisitMove instead of on every numeric type.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/checked_math.h"
#include "base/thread_pool.h"
#include "graph/internal_ops.h"
#include "ops/families.h"
#include "ops/kernel.h"
#include "ops/kv_block.h"
#include "ops/movement.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

using namespace movement;  // NOLINT: the family's shared data-movement helpers

// ---------------------------------------------------------------------------------------------
// Concat, Split, Slice, Expand, Tile.

// The shape of `ins` joined along `axis` (already normalised), or an error naming the mismatch.
absl::StatusOr<Shape> ConcatShape(OpContext& ctx, const std::vector<const Tensor*>& ins, int64_t axis) {
  const Tensor& first = *ins[0];
  const int64_t rank = first.rank();
  Shape out_shape = first.shape();
  out_shape[static_cast<size_t>(axis)] = 0;
  for (const Tensor* t : ins) {
    if (t->dtype() != first.dtype()) return InvalidArgument(ctx, "inputs have different element types");
    if (t->rank() != rank) return InvalidArgument(ctx, "inputs have different ranks");
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis && t->shape()[static_cast<size_t>(d)] != first.shape()[static_cast<size_t>(d)]) {
        return InvalidArgument(ctx, "input shapes ", ShapeToString(first.shape()), " and ", ShapeToString(t->shape()),
                               " differ outside axis ", axis);
      }
    }
    out_shape[static_cast<size_t>(axis)] += t->shape()[static_cast<size_t>(axis)];
  }
  return out_shape;
}

// Writes `ins` joined along `axis` into `out` (of ConcatShape's shape): every element.
absl::Status ConcatInto(OpContext& ctx, const std::vector<const Tensor*>& ins, int64_t axis, Tensor& out) {
  const Shape& out_shape = out.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out_shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < out.rank(); ++d) inner *= out_shape[static_cast<size_t>(d)];
  const int64_t out_block = out_shape[static_cast<size_t>(axis)] * inner;
  // Each input contributes one contiguous block per outer index (KV caches: [B*H] blocks of S*D).
  return VisitMove(out.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    U* dst = out.data<U>();
    ParallelRows(ctx, outer, out_block, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        int64_t pos = o * out_block;
        for (const Tensor* t : ins) {
          const int64_t blk = t->shape()[static_cast<size_t>(axis)] * inner;
          CopyN(dst + pos, t->data<U>() + o * blk, blk);
          pos += blk;
        }
      }
    });
    return absl::OkStatus();
  });
}

absl::Status ConcatKernel(OpContext& ctx) {
  std::vector<const Tensor*> ins;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) if (ctx.has_input(i)) ins.push_back(&ctx.input(i));
  if (ins.empty()) return InvalidArgument(ctx, "needs at least one input");
  const int64_t rank = ins[0]->rank();
  if (rank == 0) return InvalidArgument(ctx, "cannot concatenate scalars");
  if (ctx.opset() >= 4 && !ctx.node().HasAttr("axis")) return InvalidArgument(ctx, "attribute 'axis' is required");
  OI_ASSIGN(axis, Axis(ctx, ctx.node().GetInt("axis", 1), rank));
  OI_ASSIGN(out_shape, ConcatShape(ctx, ins, axis));
  if (ins.size() == 1) {
    ctx.SetOutput(0, *ins[0]);
    return absl::OkStatus();
  }
  // Uninitialised: the copy writes every element (string elements are constructed empty).
  Tensor& out = ins[0]->dtype() == DType::kString ? ctx.AllocateOutput(0, ins[0]->dtype(), out_shape)
                                                  : ctx.AllocateOutputUninitialized(0, ins[0]->dtype(), out_shape);
  return ConcatInto(ctx, ins, axis, out);
}

// KVCacheConcat's growing form: present = past + fresh along `axis` in a block whose groups' rows
// are `capacity` apart (a past that is one may be strided too, past_cap apart). With `grow` the
// present is tagged as a KV block (strided, fit to be fed back); otherwise it is dense.
absl::Status GrowingConcat(OpContext& ctx, const Tensor& past, const Tensor& fresh, int64_t axis, const Shape& out_shape,
                           bool grow, int64_t past_cap) {
  const int64_t P = past.dim(axis), S = fresh.dim(axis);
  std::shared_ptr<void> holder;
  char* base = nullptr;
  int64_t cap = P + S;
  const bool in_place = grow && IsWholeKVBlock(past) && past_cap >= P + S && ctx.InputDonated(internal_ops::KVCacheConcat::kPast);
  if (in_place) {
    holder = past.holder();
    base = static_cast<char*>(holder.get());
    cap = past_cap;
  } else {
    Shape reserve = out_shape;
    if (grow) reserve[static_cast<size_t>(axis)] = cap = internal_ops::KVCacheCapacity(P + S);
    Tensor block = ctx.AllocateTemp(past.dtype(), reserve, /*zero=*/false);
    base = static_cast<char*>(block.raw_data());
    holder = grow ? TagKVBlock(base, cap, block.holder()) : block.holder();
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out_shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < out_shape.size(); ++d) inner *= out_shape[d];
  const size_t row = static_cast<size_t>(inner) * DTypeSize(past.dtype());
  const char* src_past = static_cast<const char*>(past.raw_data());
  const char* src_new = static_cast<const char*>(fresh.raw_data());
  ParallelFor(ctx.thread_pool(), outer, KVCopyGrain(static_cast<size_t>(in_place ? S : P + S) * row), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      char* d = base + static_cast<size_t>(o * cap) * row;
      if (!in_place && P > 0) std::memcpy(d, src_past + static_cast<size_t>(o * past_cap) * row, static_cast<size_t>(P) * row);
      if (S > 0) std::memcpy(d + static_cast<size_t>(P) * row, src_new + static_cast<size_t>(o * S) * row, static_cast<size_t>(S) * row);
    }
  });
  ctx.SetOutput(0, Tensor::Wrap(past.dtype(), out_shape, std::move(holder), base));
  return absl::OkStatus();
}

// KVCacheConcat(past, new): Concat along `axis` into a block with room for
// kKVCacheCapacityStep more positions, so that each step's present cache takes the pool block
// the step before last freed (same size class) instead of freshly faulted pages. Growing (the
// node's `grow` and the run's RunOptions::grow_kv_in_place), the present is a KV block
// (ops/kv_block.h): each group's rows at the block's capacity stride, and a donated past that is
// one with room for the new rows becomes the present, only the new rows copied.
absl::Status KVCacheConcatKernel(OpContext& ctx) {
  using Op = internal_ops::KVCacheConcat;
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {Op::kPast, Op::kNew}));
  const std::vector<const Tensor*> ins = {&ctx.input(Op::kPast), &ctx.input(Op::kNew)};
  const int64_t rank = ins[0]->rank();
  if (rank == 0 || ins[0]->dtype() == DType::kString) return InvalidArgument(ctx, "the KV cache must be a numeric tensor of rank >= 1");
  OI_ASSIGN(axis, Axis(ctx, ctx.node().GetInt(Op::kAxis, 0), rank));
  OI_ASSIGN(out_shape, ConcatShape(ctx, ins, axis));
  const Tensor& past = *ins[0];
  const int64_t P = past.dim(axis);
  const bool grow = ctx.node().GetInt(Op::kGrow, 0) != 0 && ctx.run_control().grow_kv_in_place;
  const int64_t past_cap = RowCapacity(past, P);
  if (grow || past_cap != P) return GrowingConcat(ctx, past, *ins[1], axis, out_shape, grow, past_cap);
  Shape reserve = out_shape;
  reserve[static_cast<size_t>(axis)] = internal_ops::KVCacheCapacity(out_shape[static_cast<size_t>(axis)]);
  // The room is bounded (a graph whose input -> Concat -> output is not a cache must not pay
  // much for it): at most the result's own size or 16 MB, whichever is more.
  const size_t bytes = static_cast<size_t>(NumElements(out_shape)) * DTypeSize(ins[0]->dtype());
  const size_t reserved = static_cast<size_t>(NumElements(reserve)) * DTypeSize(ins[0]->dtype());
  if (reserved - bytes > std::max(bytes, size_t{16} << 20)) reserve = out_shape;
  Tensor block = ctx.AllocateTemp(ins[0]->dtype(), reserve, /*zero=*/false);
  Tensor out = Tensor::Wrap(ins[0]->dtype(), out_shape, block.holder(), block.raw_data());
  OI_RETURN_IF_ERROR(ConcatInto(ctx, ins, axis, out));
  ctx.SetOutput(0, std::move(out));
  return absl::OkStatus();
}

absl::Status SplitKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  if (in.rank() == 0) return InvalidArgument(ctx, "cannot split a scalar");
  OI_ASSIGN(axis, Axis(ctx, ctx.node().GetInt("axis", 0), in.rank()));
  const int64_t dim = in.shape()[static_cast<size_t>(axis)];
  const int64_t n_out = static_cast<int64_t>(ctx.num_outputs());
  std::vector<int64_t> split;
  if ((ctx.opset() >= 13 || ctx.opset() < 2) && ctx.has_input(1)) {
    OI_ASSIGN(v, IntsInput(ctx, 1));
    split = std::move(v);
  } else if (ctx.opset() < 13 && ctx.node().HasAttr("split")) {
    split = ctx.node().GetInts("split");
  }
  if (split.empty()) {
    if (ctx.opset() >= 18 && ctx.node().HasAttr("num_outputs") && ctx.node().GetInt("num_outputs", 0) != n_out) {
      return InvalidArgument(ctx, "num_outputs is ", ctx.node().GetInt("num_outputs", 0), " but the node has ", n_out, " outputs");
    }
    if (n_out <= 0) return InvalidArgument(ctx, "has no outputs");
    if (dim % n_out != 0 && ctx.opset() < 18) {
      return InvalidArgument(ctx, "cannot split dimension ", dim, " into ", n_out, " equal parts");
    }
    // From opset 18 the last chunk may be smaller: ceil(dim / n) each.
    const int64_t chunk = (dim + n_out - 1) / n_out;
    for (int64_t i = 0, left = dim; i < n_out; ++i) {
      split.push_back(std::min(chunk, left));
      left -= split.back();
    }
  }
  if (static_cast<int64_t>(split.size()) != n_out) {
    return InvalidArgument(ctx, "split has ", split.size(), " entries for ", n_out, " outputs");
  }
  int64_t total = 0;
  for (int64_t s : split) {
    if (s < 0) return InvalidArgument(ctx, "split has a negative entry ", s);
    total += s;
  }
  if (total != dim) return InvalidArgument(ctx, "split sums to ", total, " but the dimension is ", dim);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= in.shape()[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < in.rank(); ++d) inner *= in.shape()[static_cast<size_t>(d)];
  return VisitMove(in.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    int64_t start = 0;
    for (int64_t k = 0; k < n_out; ++k) {
      const int64_t len = split[static_cast<size_t>(k)];
      if (ctx.has_output(static_cast<size_t>(k))) {
        Shape s = in.shape();
        s[static_cast<size_t>(axis)] = len;
        if (outer == 1) {  // each part is one contiguous block: a view
          ctx.SetOutput(static_cast<size_t>(k), SubView(in, start * inner, s));
          start += len;
          continue;
        }
        U* dst = ctx.AllocateOutput(static_cast<size_t>(k), in.dtype(), s).template data<U>();
        const U* src = in.data<U>() + start * inner;
        ParallelRows(ctx, outer, len * inner, [&](int64_t b, int64_t e) {
          for (int64_t o = b; o < e; ++o) CopyN(dst + o * len * inner, src + o * dim * inner, len * inner);
        });
      }
      start += len;
    }
    return absl::OkStatus();
  });
}

absl::Status SliceKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  const int64_t rank = in.rank();
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    starts = ctx.node().GetInts("starts");
    ends = ctx.node().GetInts("ends");
    axes = ctx.node().GetInts("axes");
  } else {
    OI_RETURN_IF_ERROR(RequireInputs(ctx, {1, 2}));
    OI_ASSIGN(s, IntsInput(ctx, 1));
    OI_ASSIGN(e, IntsInput(ctx, 2));
    starts = std::move(s);
    ends = std::move(e);
    if (ctx.has_input(3)) {
      OI_ASSIGN(a, IntsInput(ctx, 3));
      axes = std::move(a);
    }
    if (ctx.has_input(4)) {
      OI_ASSIGN(st, IntsInput(ctx, 4));
      steps = std::move(st);
    }
  }
  if (starts.size() != ends.size()) return InvalidArgument(ctx, "starts and ends have different lengths");
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    return InvalidArgument(ctx, "starts, ends, axes and steps have different lengths");
  }
  OI_ASSIGN(norm, NormalizeAxes(ctx, axes, rank));
  Shape out_shape = in.shape();
  const std::vector<int64_t> in_strides = Strides(in.shape());
  std::vector<int64_t> strides = in_strides;
  int64_t offset = 0;
  for (size_t i = 0; i < norm.size(); ++i) {
    const size_t a = static_cast<size_t>(norm[i]);
    const int64_t dim = in.shape()[a];
    if (steps[i] == 0) return InvalidArgument(ctx, "step is 0 on axis ", norm[i]);
    // Steps beyond the dimension all take one element; clamping keeps the arithmetic in range.
    const int64_t step = std::clamp<int64_t>(steps[i], -(dim + 1), dim + 1);
    int64_t start = starts[i], end = ends[i];
    // Clamp in numpy's way; INT64_MAX / INT_MIN style sentinels land on the ends.
    if (start < 0) start = start < -dim ? -1 : start + dim;
    if (end < 0) end = end < -dim ? -1 : end + dim;
    int64_t len;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      len = end > start ? 1 + (end - start - 1) / step : 0;
    } else {
      start = std::clamp<int64_t>(start, -1, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      len = start > end ? 1 + (start - end - 1) / (-step) : 0;
    }
    out_shape[a] = len;
    strides[a] = in_strides[a] * step;
    if (len > 0) offset += start * in_strides[a];
  }
  // A contiguous region (e.g. a KV-cache prefix along the outer axes) is returned as a view.
  if (NumElements(out_shape) > 0 && IsDense(out_shape, strides) && !IsPacked(in.dtype())) {
    ctx.SetOutput(0, SubView(in, offset, out_shape));
    return absl::OkStatus();
  }
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), out_shape);
  if (out.num_elements() == 0) return absl::OkStatus();
  return StridedCopyTensor(ctx, in, offset, out_shape, strides, out);
}

absl::Status ExpandKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1}));
  const Tensor& in = ctx.input(0);
  OI_ASSIGN(shape, IntsInput(ctx, 1));
  for (int64_t d : shape) if (d < 0) return InvalidArgument(ctx, "shape has a negative dimension ", d);
  auto out_shape = BroadcastShapes({in.shape(), shape});
  if (!out_shape.ok()) return InvalidArgument(ctx, out_shape.status().message());
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), *out_shape);
  return StridedCopyTensor(ctx, in, 0, *out_shape, BroadcastStrides(in.shape(), *out_shape), out);
}

absl::Status TileKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1}));
  const Tensor& in = ctx.input(0);
  const int64_t rank = in.rank();
  std::vector<int64_t> reps;
  if (ctx.opset() < 6) {
    // Tile-1: a scalar count `tiles` along a scalar `axis`.
    OI_RETURN_IF_ERROR(RequireInputs(ctx, {2}));
    OI_ASSIGN(t, IntsInput(ctx, 1));
    OI_ASSIGN(a, IntsInput(ctx, 2));
    if (t.size() != 1 || a.size() != 1) return InvalidArgument(ctx, "tiles and axis must be scalars");
    OI_ASSIGN(axis, Axis(ctx, a[0], rank));
    reps.assign(static_cast<size_t>(rank), 1);
    reps[static_cast<size_t>(axis)] = t[0];
  } else {
    OI_ASSIGN(v, IntsInput(ctx, 1));
    reps = std::move(v);
  }
  if (static_cast<int64_t>(reps.size()) != rank) {
    return InvalidArgument(ctx, "repeats has ", reps.size(), " entries for an input of rank ", rank);
  }
  // View the output as [r0, d0, r1, d1, ...] reading the input with stride 0 over each r.
  const std::vector<int64_t> in_strides = Strides(in.shape());
  Shape out_shape, view_shape;
  std::vector<int64_t> view_strides;
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) return InvalidArgument(ctx, "repeats has a negative entry ", reps[i]);
    // Checked: a wrapped product would allocate less than the copy below writes.
    int64_t tiled = 0;
    if (!CheckedMul(in.shape()[i], reps[i], &tiled)) {
      return absl::ResourceExhaustedError(absl::StrCat(ctx.node().Describe(), ": repeating axis ", i, " of ", in.shape()[i],
                                                       " by ", reps[i], " overflows 64 bits"));
    }
    out_shape.push_back(tiled);
    view_shape.insert(view_shape.end(), {reps[i], in.shape()[i]});
    view_strides.insert(view_strides.end(), {0, in_strides[i]});
  }
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), out_shape);
  return StridedCopyTensor(ctx, in, 0, view_shape, view_strides, out);
}

// ---------------------------------------------------------------------------------------------
// Pad.

absl::Status PadCheck(const KernelInit& init) {
  if (init.opset() >= 19) return CheckOneOf(init, "mode", "constant", {"constant", "reflect", "edge", "wrap"});
  return CheckOneOf(init, "mode", "constant", {"constant", "reflect", "edge"});
}

absl::Status PadKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  const int64_t rank = in.rank();
  const std::string mode = ctx.node().GetString("mode", "constant");
  std::vector<int64_t> pads;
  Tensor fill;  // one element of the input's type
  if (ctx.opset() < 11) {
    pads = ctx.node().GetInts(ctx.opset() < 2 ? "paddings" : "pads");
    const float value = ctx.node().GetFloat("value", 0.0f);
    if (in.dtype() == DType::kString) return InvalidArgument(ctx, "string input needs Pad-11 or later");
    OI_ASSIGN(f, CastTensor(Tensor::FromVector<float>(DType::kFloat32, {}, {value}), in.dtype()));
    fill = std::move(f);
  } else {
    OI_RETURN_IF_ERROR(RequireInputs(ctx, {1}));
    OI_ASSIGN(p, IntsInput(ctx, 1));
    pads = std::move(p);
    if (ctx.has_input(2) && ctx.input(2).num_elements() > 0) {
      if (ctx.input(2).dtype() != in.dtype()) return InvalidArgument(ctx, "constant_value has a different element type");
      fill = ctx.input(2);
    } else {
      fill = Tensor::Empty(in.dtype(), {});
    }
  }
  std::vector<int64_t> axes;
  if (ctx.opset() >= 18 && ctx.has_input(3)) {
    OI_ASSIGN(a, IntsInput(ctx, 3));
    OI_ASSIGN(n, NormalizeAxes(ctx, a, rank));
    axes = std::move(n);
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (pads.size() != 2 * axes.size()) {
    return InvalidArgument(ctx, "pads has ", pads.size(), " entries, expected ", 2 * axes.size());
  }
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0), end(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    begin[static_cast<size_t>(axes[i])] = pads[i];
    end[static_cast<size_t>(axes[i])] = pads[i + axes.size()];
  }
  Shape out_shape(static_cast<size_t>(rank));
  for (size_t a = 0; a < static_cast<size_t>(rank); ++a) {
    if (__builtin_add_overflow(in.shape()[a], begin[a], &out_shape[a]) ||
        __builtin_add_overflow(out_shape[a], end[a], &out_shape[a])) {
      return InvalidArgument(ctx, "pads ", begin[a], " and ", end[a], " make axis ", a, " overflow 64 bits");
    }
    if (out_shape[a] < 0) return InvalidArgument(ctx, "pads make axis ", a, " negative");
  }
  // Allocated before the per-axis maps, so that pads from data claiming more than the session
  // may hold are refused before anything the size of an axis is built.
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), out_shape);
  if (out.num_elements() == 0) return absl::OkStatus();
  // Per axis: output coordinate -> input coordinate, or -1 for the constant.
  std::vector<std::vector<int64_t>> map(static_cast<size_t>(rank));
  for (size_t a = 0; a < static_cast<size_t>(rank); ++a) {
    const int64_t n = in.shape()[a];
    map[a].resize(static_cast<size_t>(out_shape[a]));
    for (int64_t o = 0; o < out_shape[a]; ++o) {
      int64_t i = o - begin[a];
      if (i < 0 || i >= n) {
        if (mode == "constant") {
          i = -1;
        } else if (n == 0) {
          return InvalidArgument(ctx, "cannot pad an empty axis in ", mode, " mode");
        } else if (mode == "edge") {
          i = std::clamp<int64_t>(i, 0, n - 1);
        } else if (mode == "wrap") {
          i = ((i % n) + n) % n;
        } else if (n == 1) {  // reflect
          i = 0;
        } else {
          const int64_t period = 2 * (n - 1);
          i = std::abs(i) % period;
          if (i >= n) i = period - i;
        }
      }
      map[a][static_cast<size_t>(o)] = i;
    }
  }
  return VisitMove(in.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    const U c = fill.data<U>()[0];
    const U* src = in.data<U>();
    U* dst = out.data<U>();
    if (rank == 0) {
      dst[0] = src[0];
      return absl::OkStatus();
    }
    const std::vector<int64_t> st = Strides(in.shape());
    const size_t r = static_cast<size_t>(rank) - 1;
    const int64_t inner = out_shape[r];
    const std::vector<int64_t>& last = map[r];
    const int64_t rows = out.num_elements() / inner;
    ParallelRows(ctx, rows, inner, [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        int64_t off = 0, rem = row;
        bool constant = false;
        for (size_t k = r; k-- > 0;) {
          const int64_t m = map[k][static_cast<size_t>(rem % out_shape[k])];
          rem /= out_shape[k];
          if (m < 0) constant = true;
          off += m * st[k];
        }
        U* o = dst + row * inner;
        if (constant) {
          std::fill(o, o + inner, c);
          continue;
        }
        const U* p = src + off;
        for (int64_t j = 0; j < inner; ++j) {
          const int64_t m = last[static_cast<size_t>(j)];
          o[j] = m < 0 ? c : p[m];
        }
      }
    });
    return absl::OkStatus();
  });
}

}  // namespace

void RegisterSliceConcatOps(KernelRegistry& r) {
  AddVersions(r, "Concat", {1, 4, 11, 13}, ConcatKernel);
  r.AddFn(internal_ops::kDomain, internal_ops::KVCacheConcat::kName, internal_ops::kOpset, internal_ops::kOpset,
          KVCacheConcatKernel);
  AddVersions(r, "Split", {1, 2, 11, 13, 18}, SplitKernel);
  AddVersions(r, "Slice", {1, 10, 11, 13}, SliceKernel);
  AddVersions(r, "Expand", {8, 13}, ExpandKernel);
  AddVersions(r, "Tile", {1, 6, 13}, TileKernel);
  AddVersions(r, "Pad", {1, 2, 11, 13, 18, 19, 21, 23}, Checked(PadCheck, PadKernel));
}

}  // namespace oneinfer
