// Shape and data-movement operators: Shape, Reshape, Transpose, Concat, Slice, Gather, Scatter, Pad, ...
//
// Data movement does not look at values, so most kernels dispatch on the element's storage
// unit (1/2/4/8 bytes or std::string) through VisitMove instead of on every numeric type.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "ops/kernel.h"
#include "base/thread_pool.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

constexpr int64_t kNewestOpset = 21;
// Elements per parallel task for plain copies: below this, threading costs more than it saves.
constexpr int64_t kCopyGrain = 1 << 15;

// ---------------------------------------------------------------------------------------------
// Registration helpers.

// Registers `factory` once per schema version: since[i] .. since[i+1]-1, the last through 21.
void AddVersions(KernelRegistry& r, const std::string& op, std::initializer_list<int64_t> since,
                 const KernelFactory& factory, bool non_tensors = false) {
  std::vector<int64_t> v(since);
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t last = i + 1 < v.size() ? v[i + 1] - 1 : kNewestOpset;
    r.Add("", op, v[i], last, factory).accepts_non_tensors = non_tensors;
  }
}
void AddVersions(KernelRegistry& r, const std::string& op, std::initializer_list<int64_t> since, KernelFn fn) {
  AddVersions(r, op, since, MakeFnKernel(std::move(fn)));
}

// A function kernel whose attributes are validated once at load time.
KernelFactory Checked(std::function<absl::Status(const KernelInit&)> check, KernelFn fn) {
  return [check = std::move(check), fn = std::move(fn)](const KernelInit& init)
             -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    absl::Status s = check(init);
    if (!s.ok()) return s;
    return MakeFnKernel(fn)(init);
  };
}

absl::Status CheckOneOf(const KernelInit& init, const std::string& attr, const std::string& def,
                        std::initializer_list<const char*> allowed) {
  const std::string v = init.node().GetString(attr, def);
  for (const char* a : allowed) if (v == a) return absl::OkStatus();
  return Unimplemented(init.node(), "unsupported ", attr, " '", v, "'");
}

// ---------------------------------------------------------------------------------------------
// Element helpers.

// Calls fn(TypeTag<U>{}) with U the storage unit of `dtype` (same-size unsigned int, or string).
template <typename Fn>
absl::Status VisitMove(DType dtype, Fn&& fn) {
  if (dtype == DType::kString) return fn(TypeTag<std::string>{});
  if (dtype == DType::kInt4 || dtype == DType::kUInt4 || dtype == DType::kUndefined) {
    return absl::UnimplementedError(absl::StrCat("unsupported element type ", DTypeName(dtype)));
  }
  switch (DTypeSize(dtype)) {
    case 1: return fn(TypeTag<uint8_t>{});
    case 2: return fn(TypeTag<uint16_t>{});
    case 4: return fn(TypeTag<uint32_t>{});
    case 8: return fn(TypeTag<uint64_t>{});
    default: return absl::UnimplementedError(absl::StrCat("unsupported element type ", DTypeName(dtype)));
  }
}

template <typename T>
inline void CopyN(T* dst, const T* src, int64_t n) {
  if constexpr (std::is_trivially_copyable_v<T>) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  } else {
    std::copy(src, src + n, dst);
  }
}

// Runs fn(begin, end) over [0, n) items of `item_elems` elements each, in parallel when large.
void ParallelRows(OpContext& ctx, int64_t n, int64_t item_elems, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t grain = std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(1, item_elems));
  ParallelFor(ctx.thread_pool(), n, grain, fn);
}

// dst (contiguous, `shape`) [i...] = src[sum i_k * strides_k]; strides may be 0 or negative.
// Dims are coalesced first, so a row-contiguous source becomes block copies (this covers
// the [B,S,H,D] <-> [B,H,S,D] attention transposes) and a swapped last pair becomes a
// blocked 2-D transpose.
template <typename T>
void StridedCopy(OpContext& ctx, const T* src, const Shape& shape, const std::vector<int64_t>& strides, T* dst) {
  if (NumElements(shape) == 0) return;
  Shape d;
  std::vector<int64_t> s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!d.empty() && s.back() == strides[i] * shape[i]) {
      d.back() *= shape[i];
      s.back() = strides[i];
    } else {
      d.push_back(shape[i]);
      s.push_back(strides[i]);
    }
  }
  if (d.empty()) {
    dst[0] = src[0];
    return;
  }
  const size_t r = d.size() - 1;
  const int64_t inner = d.back(), is = s.back();
  // Offset of outer row `row` (over dims [0, r)).
  auto row_offset = [&](int64_t row, std::vector<int64_t>& idx) {
    int64_t off = 0;
    for (size_t k = r; k-- > 0;) {
      idx[k] = row % d[k];
      row /= d[k];
      off += idx[k] * s[k];
    }
    return off;
  };
  if (is != 1 && r >= 1 && s[r - 1] == 1 && inner >= 8 && d[r - 1] >= 8) {
    // Batched transpose: out block [R, C] with src(i, j) = base + i + j * is.
    constexpr int64_t kB = 32;
    const int64_t R = d[r - 1], C = inner, nb = (R + kB - 1) / kB;
    const int64_t batches = NumElements(d) / (R * C);
    ParallelRows(ctx, batches * nb, kB * C, [&](int64_t b, int64_t e) {
      std::vector<int64_t> idx(r);
      for (int64_t t = b; t < e; ++t) {
        const int64_t batch = t / nb, i0 = (t % nb) * kB, i1 = std::min(R, i0 + kB);
        const int64_t base = row_offset(batch * R, idx);
        T* out = dst + batch * R * C;
        for (int64_t j0 = 0; j0 < C; j0 += kB) {
          const int64_t j1 = std::min(C, j0 + kB);
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = j0; j < j1; ++j) out[i * C + j] = src[base + i + j * is];
        }
      }
    });
    return;
  }
  const int64_t rows = NumElements(d) / inner;
  ParallelRows(ctx, rows, inner, [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(r);
    int64_t off = row_offset(b, idx);
    for (int64_t row = b; row < e; ++row) {
      T* o = dst + row * inner;
      const T* p = src + off;
      if (is == 1) {
        CopyN(o, p, inner);
      } else if (is == 0) {
        std::fill(o, o + inner, *p);
      } else {
        for (int64_t j = 0; j < inner; ++j) o[j] = p[j * is];
      }
      for (size_t k = r; k-- > 0;) {
        off += s[k];
        if (++idx[k] < d[k]) break;
        off -= d[k] * s[k];
        idx[k] = 0;
      }
    }
  });
}

absl::Status StridedCopyTensor(OpContext& ctx, const Tensor& in, int64_t offset, const Shape& shape,
                               const std::vector<int64_t>& strides, Tensor& out) {
  return VisitMove(in.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    StridedCopy<U>(ctx, in.data<U>() + offset, shape, strides, out.data<U>());
    return absl::OkStatus();
  });
}

// A view of `in` starting `offset` elements in, sharing its storage (no copy).
Tensor SubView(const Tensor& in, int64_t offset, Shape shape) {
  char* base = static_cast<char*>(const_cast<void*>(in.raw_data()));
  return Tensor::Wrap(in.dtype(), std::move(shape), in.holder(), base + offset * static_cast<int64_t>(DTypeSize(in.dtype())));
}
bool Packed(DType t) { return t == DType::kInt4 || t == DType::kUInt4; }

// True when reading `shape` with `strides` walks one dense block of memory in order.
bool IsDense(const Shape& shape, const std::vector<int64_t>& strides) {
  int64_t expect = 1;
  for (size_t a = shape.size(); a-- > 0;) {
    if (shape[a] == 1) continue;
    if (strides[a] != expect) return false;
    expect *= shape[a];
  }
  return true;
}

// Reads an int tensor input as int64 values.
absl::StatusOr<std::vector<int64_t>> IntsInput(const OpContext& ctx, size_t i) {
  auto v = ReadInts(ctx.input(i));
  if (!v.ok()) return InvalidArgument(ctx, "input ", i, ": ", v.status().message());
  return v;
}

#define OI_ASSIGN(lhs, expr)                     \
  auto lhs##_or = (expr);                        \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

#define OI_RETURN_IF_ERROR(expr)         \
  do {                                   \
    absl::Status _s = (expr);            \
    if (!_s.ok()) return _s;             \
  } while (0)

absl::StatusOr<int64_t> Axis(const OpContext& ctx, int64_t axis, int64_t rank) {
  auto a = NormalizeAxis(axis, rank);
  if (!a.ok()) return InvalidArgument(ctx, a.status().message());
  return *a;
}

// Axes (from an attribute or an input) normalised against `rank`, checked for duplicates.
absl::StatusOr<std::vector<int64_t>> NormalizeAxes(const OpContext& ctx, std::vector<int64_t> axes, int64_t rank) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& a : axes) {
    OI_ASSIGN(n, Axis(ctx, a, rank));
    if (seen[static_cast<size_t>(n)]) return InvalidArgument(ctx, "axis ", a, " is repeated");
    seen[static_cast<size_t>(n)] = true;
    a = n;
  }
  return axes;
}

absl::Status RequireInputs(const OpContext& ctx, std::initializer_list<size_t> required) {
  for (size_t i : required) {
    if (!ctx.has_input(i)) return InvalidArgument(ctx, "required input ", i, " is missing");
  }
  return absl::OkStatus();
}

// Index into [0, dim) from a possibly negative index; error when out of range.
inline bool FixIndex(int64_t& i, int64_t dim) {
  if (i < -dim || i >= dim) return false;
  if (i < 0) i += dim;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Shape, Size, Identity and the view ops.

absl::Status ShapeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Shape& s = ctx.input(0).shape();
  const int64_t rank = static_cast<int64_t>(s.size());
  auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  const int64_t start = clamp(ctx.node().GetInt("start", 0));
  const int64_t end = clamp(ctx.node().GetInt("end", rank));
  const int64_t n = std::max<int64_t>(0, end - start);
  Tensor& out = ctx.AllocateOutput(0, DType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = s[static_cast<size_t>(start + i)];
  return absl::OkStatus();
}

absl::Status SizeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  ctx.AllocateOutput(0, DType::kInt64, {}).data<int64_t>()[0] = ctx.input(0).num_elements();
  return absl::OkStatus();
}

absl::Status IdentityKernel(OpContext& ctx) {
  const Value* v = ctx.input_value(0);
  if (v == nullptr) return InvalidArgument(ctx, "required input 0 is missing");
  ctx.SetOutputValue(0, *v);
  return absl::OkStatus();
}

absl::Status ReshapeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  std::vector<int64_t> spec;
  if (ctx.opset() < 5) {
    spec = ctx.node().GetInts("shape");
  } else {
    OI_RETURN_IF_ERROR(RequireInputs(ctx, {1}));
    OI_ASSIGN(v, IntsInput(ctx, 1));
    spec = std::move(v);
  }
  const bool allow_zero = ctx.opset() >= 14 && ctx.node().GetInt("allowzero", 0) != 0;
  Shape out(spec.size());
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allow_zero) {
      if (static_cast<int64_t>(i) >= in.rank()) {
        return InvalidArgument(ctx, "shape ", i, " is 0 (copy) but the input has rank ", in.rank());
      }
      d = in.shape()[i];
    } else if (d == -1) {
      if (infer >= 0) return InvalidArgument(ctx, "shape has more than one -1");
      infer = static_cast<int64_t>(i);
      continue;
    } else if (d < 0) {
      return InvalidArgument(ctx, "shape has invalid dimension ", d);
    }
    out[i] = d;
    known *= d;
  }
  const int64_t n = in.num_elements();
  if (infer >= 0) {
    if (known == 0 || n % known != 0) {
      return InvalidArgument(ctx, "cannot reshape ", ShapeToString(in.shape()), " to ", ShapeToString(spec));
    }
    out[static_cast<size_t>(infer)] = n / known;
  } else if (known != n) {
    return InvalidArgument(ctx, "cannot reshape ", ShapeToString(in.shape()), " to ", ShapeToString(spec));
  }
  ctx.SetOutput(0, in.Reshaped(std::move(out)));
  return absl::OkStatus();
}

absl::Status FlattenKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  int64_t axis = ctx.node().GetInt("axis", 1);
  if (axis < 0) axis += in.rank();
  if (axis < 0 || axis > in.rank()) return InvalidArgument(ctx, "axis ", ctx.node().GetInt("axis", 1), " is out of range for rank ", in.rank());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < in.rank(); ++i) (i < axis ? outer : inner) *= in.shape()[static_cast<size_t>(i)];
  ctx.SetOutput(0, in.Reshaped({outer, inner}));
  return absl::OkStatus();
}

// Axes of Squeeze/Unsqueeze: attribute before opset 13, optional input from 13.
absl::StatusOr<std::optional<std::vector<int64_t>>> AxesAttrOrInput(OpContext& ctx, size_t input) {
  if (ctx.opset() < 13) {
    if (!ctx.node().HasAttr("axes")) return std::optional<std::vector<int64_t>>();
    return std::optional<std::vector<int64_t>>(ctx.node().GetInts("axes"));
  }
  if (!ctx.has_input(input)) return std::optional<std::vector<int64_t>>();
  OI_ASSIGN(v, IntsInput(ctx, input));
  return std::optional<std::vector<int64_t>>(std::move(v));
}

absl::Status SqueezeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  OI_ASSIGN(axes, AxesAttrOrInput(ctx, 1));
  std::vector<bool> drop(static_cast<size_t>(in.rank()), false);
  if (axes) {
    OI_ASSIGN(norm, NormalizeAxes(ctx, *axes, in.rank()));
    for (int64_t a : norm) {
      if (in.shape()[static_cast<size_t>(a)] != 1) {
        return InvalidArgument(ctx, "cannot squeeze axis ", a, " of size ", in.shape()[static_cast<size_t>(a)]);
      }
      drop[static_cast<size_t>(a)] = true;
    }
  } else {
    for (size_t i = 0; i < drop.size(); ++i) drop[i] = in.shape()[i] == 1;
  }
  Shape out;
  for (size_t i = 0; i < drop.size(); ++i) if (!drop[i]) out.push_back(in.shape()[i]);
  ctx.SetOutput(0, in.Reshaped(std::move(out)));
  return absl::OkStatus();
}

absl::Status UnsqueezeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  OI_ASSIGN(axes, AxesAttrOrInput(ctx, 1));
  if (!axes) return InvalidArgument(ctx, "axes are required");
  const int64_t rank = in.rank() + static_cast<int64_t>(axes->size());
  OI_ASSIGN(norm, NormalizeAxes(ctx, *axes, rank));
  std::vector<bool> ins(static_cast<size_t>(rank), false);
  for (int64_t a : norm) ins[static_cast<size_t>(a)] = true;
  Shape out;
  size_t k = 0;
  for (size_t i = 0; i < ins.size(); ++i) out.push_back(ins[i] ? 1 : in.shape()[k++]);
  ctx.SetOutput(0, in.Reshaped(std::move(out)));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Transpose, Concat, Split, Slice, Expand, Tile.

absl::Status TransposeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  const int64_t rank = in.rank();
  std::vector<int64_t> perm = ctx.node().GetInts("perm");
  if (perm.empty()) {
    perm.resize(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = rank - 1 - i;
  }
  if (static_cast<int64_t>(perm.size()) != rank) {
    return InvalidArgument(ctx, "perm has ", perm.size(), " entries for an input of rank ", rank);
  }
  OI_ASSIGN(p, NormalizeAxes(ctx, perm, rank));
  const std::vector<int64_t> in_strides = Strides(in.shape());
  Shape out_shape(p.size());
  std::vector<int64_t> strides(p.size());
  bool ordered = true;  // the non-unit dims keep their order: the result is a view
  int64_t last = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    const size_t a = static_cast<size_t>(p[i]);
    out_shape[i] = in.shape()[a];
    strides[i] = in_strides[a];
    if (out_shape[i] != 1) {
      if (p[i] < last) ordered = false;
      last = p[i];
    }
  }
  if (ordered) {
    ctx.SetOutput(0, in.Reshaped(std::move(out_shape)));
    return absl::OkStatus();
  }
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), out_shape);
  return StridedCopyTensor(ctx, in, 0, out_shape, strides, out);
}

absl::Status ConcatKernel(OpContext& ctx) {
  std::vector<const Tensor*> ins;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) if (ctx.has_input(i)) ins.push_back(&ctx.input(i));
  if (ins.empty()) return InvalidArgument(ctx, "needs at least one input");
  const Tensor& first = *ins[0];
  const int64_t rank = first.rank();
  if (rank == 0) return InvalidArgument(ctx, "cannot concatenate scalars");
  if (ctx.opset() >= 4 && !ctx.node().HasAttr("axis")) return InvalidArgument(ctx, "attribute 'axis' is required");
  OI_ASSIGN(axis, Axis(ctx, ctx.node().GetInt("axis", 1), rank));
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
  if (ins.size() == 1) {
    ctx.SetOutput(0, first);
    return absl::OkStatus();
  }
  Tensor& out = ctx.AllocateOutput(0, first.dtype(), out_shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out_shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= out_shape[static_cast<size_t>(d)];
  const int64_t out_block = out_shape[static_cast<size_t>(axis)] * inner;
  // Each input contributes one contiguous block per outer index (KV caches: [B*H] blocks of S*D).
  return VisitMove(first.dtype(), [&](auto tag) -> absl::Status {
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
  if (NumElements(out_shape) > 0 && IsDense(out_shape, strides) && !Packed(in.dtype())) {
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
    out_shape.push_back(in.shape()[i] * reps[i]);
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
  // Per axis: output coordinate -> input coordinate, or -1 for the constant.
  std::vector<std::vector<int64_t>> map(static_cast<size_t>(rank));
  for (size_t a = 0; a < static_cast<size_t>(rank); ++a) {
    const int64_t n = in.shape()[a];
    out_shape[a] = n + begin[a] + end[a];
    if (out_shape[a] < 0) return InvalidArgument(ctx, "pads make axis ", a, " negative");
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
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), out_shape);
  if (out.num_elements() == 0) return absl::OkStatus();
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

// ---------------------------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth.

absl::Status DepthToSpaceKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  const int64_t b = ctx.node().GetInt("blocksize", 0);
  if (in.rank() != 4) return InvalidArgument(ctx, "input must be 4-D, got ", ShapeToString(in.shape()));
  const int64_t N = in.dim(0), C = in.dim(1), H = in.dim(2), W = in.dim(3);
  if (b <= 0 || C % (b * b) != 0) return InvalidArgument(ctx, "channels ", C, " are not divisible by blocksize^2 (", b, ")");
  const int64_t c = C / (b * b);
  const bool crd = ctx.opset() >= 11 && ctx.node().GetString("mode", "DCR") == "CRD";
  // Output viewed as [N, c, H, b1, W, b2]; the input as [N, b1, b2, c, H, W] (DCR) or [N, c, b1, b2, H, W] (CRD).
  const int64_t sN = C * H * W, sHW = H * W;
  std::vector<int64_t> strides = crd ? std::vector<int64_t>{sN, b * b * sHW, W, b * sHW, 1, sHW}
                                     : std::vector<int64_t>{sN, sHW, W, b * c * sHW, 1, c * sHW};
  const Shape view = {N, c, H, b, W, b};
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), {N, c, H * b, W * b});
  return StridedCopyTensor(ctx, in, 0, view, strides, out);
}

absl::Status SpaceToDepthKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  const int64_t b = ctx.node().GetInt("blocksize", 0);
  if (in.rank() != 4) return InvalidArgument(ctx, "input must be 4-D, got ", ShapeToString(in.shape()));
  const int64_t N = in.dim(0), C = in.dim(1), H = in.dim(2), W = in.dim(3);
  if (b <= 0 || H % b != 0 || W % b != 0) return InvalidArgument(ctx, "spatial dims are not divisible by blocksize ", b);
  // Output viewed as [N, b1, b2, C, H/b, W/b]; the input as [N, C, H/b, b1, W/b, b2].
  const Shape view = {N, b, b, C, H / b, W / b};
  const std::vector<int64_t> strides = {C * H * W, W, 1, H * W, b * W, b};
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), {N, C * b * b, H / b, W / b});
  return StridedCopyTensor(ctx, in, 0, view, strides, out);
}

// ---------------------------------------------------------------------------------------------
// Generators: Range, ConstantOfShape, EyeLike, Trilu.

absl::Status RangeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1, 2}));
  const DType dt = ctx.input(0).dtype();
  for (size_t i = 0; i < 3; ++i) {
    if (ctx.input(i).dtype() != dt) return InvalidArgument(ctx, "start, limit and delta must have the same type");
    if (ctx.input(i).num_elements() != 1) return InvalidArgument(ctx, "input ", i, " must be a scalar");
  }
  if (dt != DType::kFloat32 && dt != DType::kFloat64 && dt != DType::kInt16 && dt != DType::kInt32 && dt != DType::kInt64) {
    return InvalidArgument(ctx, "unsupported element type ", DTypeName(dt));
  }
  return VisitNumeric(dt, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const T start = ctx.input(0).data<T>()[0], limit = ctx.input(1).data<T>()[0], delta = ctx.input(2).data<T>()[0];
      if (delta == T(0)) return InvalidArgument(ctx, "delta is 0");
      int64_t n;
      if constexpr (std::is_integral_v<T>) {
        const int64_t span = static_cast<int64_t>(limit) - static_cast<int64_t>(start), d = delta;
        n = span / d + ((span % d != 0 && ((span < 0) == (d < 0))) ? 1 : 0);
      } else {
        const double q = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
        if (!std::isfinite(q)) return InvalidArgument(ctx, "the range has no finite length");
        n = static_cast<int64_t>(q);
      }
      n = std::max<int64_t>(n, 0);
      T* out = ctx.AllocateOutput(0, dt, {n}).template data<T>();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
      return absl::OkStatus();
    } else {
      return InvalidArgument(ctx, "unsupported element type");
    }
  });
}

absl::Status ConstantOfShapeCheck(const KernelInit& init) {
  const Attribute* a = init.node().FindAttr("value");
  if (a != nullptr && (a->type != Attribute::Type::kTensor || a->t.num_elements() != 1)) {
    return absl::InvalidArgumentError(absl::StrCat(init.node().Describe(), ": 'value' must be a one-element tensor"));
  }
  return absl::OkStatus();
}

absl::Status ConstantOfShapeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  OI_ASSIGN(shape, IntsInput(ctx, 0));
  for (int64_t d : shape) if (d < 0) return InvalidArgument(ctx, "shape has a negative dimension ", d);
  const Attribute* a = ctx.node().FindAttr("value");
  const Tensor value = a != nullptr ? a->t : Tensor::Empty(DType::kFloat32, {1});
  Tensor& out = ctx.AllocateOutput(0, value.dtype(), shape);
  return VisitMove(value.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    std::fill(out.data<U>(), out.data<U>() + out.num_elements(), value.data<U>()[0]);
    return absl::OkStatus();
  });
}

absl::Status EyeLikeKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  if (in.rank() != 2) return InvalidArgument(ctx, "input must be 2-D, got ", ShapeToString(in.shape()));
  const DType dt = ctx.node().HasAttr("dtype") ? static_cast<DType>(ctx.node().GetInt("dtype", 1)) : in.dtype();
  const int64_t k = ctx.node().GetInt("k", 0), rows = in.dim(0), cols = in.dim(1);
  if (dt == DType::kString) return InvalidArgument(ctx, "unsupported output type string");
  auto s = VisitNumeric(dt, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* out = ctx.AllocateOutput(0, dt, in.shape()).template data<T>();
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t j = i + k;
      if (j >= 0 && j < cols) out[i * cols + j] = T(1.0f);
    }
    return absl::OkStatus();
  });
  return s.ok() ? s : InvalidArgument(ctx, s.message());
}

absl::Status TriluKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  if (in.rank() < 2) return InvalidArgument(ctx, "input must have rank >= 2, got ", ShapeToString(in.shape()));
  int64_t k = 0;
  if (ctx.has_input(1)) {
    OI_ASSIGN(kv, IntsInput(ctx, 1));
    if (kv.size() != 1) return InvalidArgument(ctx, "k must be a scalar");
    k = std::clamp<int64_t>(kv[0], -(in.dim(-2) + 1), in.dim(-1) + 1);  // beyond the matrix all k act alike
  }
  const bool upper = ctx.node().GetInt("upper", 1) != 0;
  const int64_t R = in.dim(-2), C = in.dim(-1);
  const int64_t mats = R * C == 0 ? 0 : in.num_elements() / (R * C);
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), in.shape());
  return VisitMove(in.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    const U* src = in.data<U>();
    U* dst = out.data<U>();
    for (int64_t m = 0; m < mats; ++m) {
      for (int64_t i = 0; i < R; ++i) {
        // Keep j >= i + k (upper) or j <= i + k (lower); the rest stays zero.
        const int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, C) : 0;
        const int64_t hi = upper ? C : std::clamp<int64_t>(i + k + 1, 0, C);
        const int64_t base = (m * R + i) * C;
        CopyN(dst + base + lo, src + base + lo, hi - lo);
      }
    }
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------------
// Gather family.

absl::Status GatherKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1}));
  const Tensor& data = ctx.input(0);
  if (data.rank() == 0) return InvalidArgument(ctx, "data must have rank >= 1");
  OI_ASSIGN(axis, Axis(ctx, ctx.node().GetInt("axis", 0), data.rank()));
  OI_ASSIGN(idx, IntsInput(ctx, 1));
  const int64_t dim = data.shape()[static_cast<size_t>(axis)];
  for (int64_t& i : idx) {
    if (!FixIndex(i, dim)) return InvalidArgument(ctx, "index ", i, " is out of range for axis ", axis, " of size ", dim);
  }
  Shape out_shape(data.shape().begin(), data.shape().begin() + axis);
  out_shape.insert(out_shape.end(), ctx.input(1).shape().begin(), ctx.input(1).shape().end());
  out_shape.insert(out_shape.end(), data.shape().begin() + axis + 1, data.shape().end());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape()[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < data.rank(); ++d) inner *= data.shape()[static_cast<size_t>(d)];
  Tensor& out = ctx.AllocateOutput(0, data.dtype(), out_shape);
  const int64_t n = static_cast<int64_t>(idx.size());
  return VisitMove(data.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    const U* src = data.data<U>();
    U* dst = out.data<U>();
    ParallelRows(ctx, outer * n, inner, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / n, j = t % n;
        CopyN(dst + t * inner, src + (o * dim + idx[static_cast<size_t>(j)]) * inner, inner);
      }
    });
    return absl::OkStatus();
  });
}

// Calls fn(out_index, coords) for every index of `shape`, coords being its multi-index.
template <typename Fn>
void ForEachIndex(const Shape& shape, Fn&& fn) {
  const int64_t n = NumElements(shape);
  std::vector<int64_t> c(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    fn(i, c);
    for (size_t k = shape.size(); k-- > 0;) {
      if (++c[k] < shape[k]) break;
      c[k] = 0;
    }
  }
}

// Shared checks of GatherElements / ScatterElements: returns indices normalised into range.
absl::StatusOr<std::vector<int64_t>> ElementIndices(const OpContext& ctx, const Tensor& data, const Tensor& indices,
                                                    int64_t axis) {
  if (indices.rank() != data.rank()) {
    return InvalidArgument(ctx, "indices rank ", indices.rank(), " differs from data rank ", data.rank());
  }
  for (int64_t d = 0; d < data.rank(); ++d) {
    if (d != axis && indices.dim(d) > data.dim(d)) {
      return InvalidArgument(ctx, "indices shape ", ShapeToString(indices.shape()), " exceeds data shape ",
                             ShapeToString(data.shape()), " outside the axis");
    }
  }
  OI_ASSIGN(idx, IntsInput(ctx, 1));
  const int64_t dim = data.dim(axis);
  for (int64_t& i : idx) {
    if (!FixIndex(i, dim)) return InvalidArgument(ctx, "index ", i, " is out of range for axis ", axis, " of size ", dim);
  }
  return idx;
}

absl::Status GatherElementsKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1}));
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  if (data.rank() == 0) return InvalidArgument(ctx, "data must have rank >= 1");
  OI_ASSIGN(axis, Axis(ctx, ctx.node().GetInt("axis", 0), data.rank()));
  OI_ASSIGN(idx, ElementIndices(ctx, data, indices, axis));
  const std::vector<int64_t> st = Strides(data.shape());
  Tensor& out = ctx.AllocateOutput(0, data.dtype(), indices.shape());
  return VisitMove(data.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    const U* src = data.data<U>();
    U* dst = out.data<U>();
    ForEachIndex(indices.shape(), [&](int64_t i, const std::vector<int64_t>& c) {
      int64_t off = 0;
      for (size_t k = 0; k < c.size(); ++k) off += (static_cast<int64_t>(k) == axis ? idx[static_cast<size_t>(i)] : c[k]) * st[k];
      dst[i] = src[off];
    });
    return absl::OkStatus();
  });
}

// Element offsets of the slices GatherND/ScatterND address: for each index tuple (batched
// over the first batch_dims dims), the offset of data[batch, i0, ..., ik-1, ...].
absl::StatusOr<std::vector<int64_t>> NDOffsets(const OpContext& ctx, const Tensor& data, const Tensor& indices,
                                               int64_t batch_dims, int64_t* slice_elems) {
  if (indices.rank() < 1) return InvalidArgument(ctx, "indices must have rank >= 1");
  const int64_t k = indices.dim(-1), r = data.rank();
  if (batch_dims < 0 || batch_dims >= std::min(r, indices.rank())) {
    return InvalidArgument(ctx, "batch_dims ", batch_dims, " is out of range");
  }
  if (k < 1 || k > r - batch_dims) {
    return InvalidArgument(ctx, "indices last dimension ", k, " is out of range for data rank ", r);
  }
  for (int64_t d = 0; d < batch_dims; ++d) {
    if (data.dim(d) != indices.dim(d)) return InvalidArgument(ctx, "batch dimension ", d, " differs between data and indices");
  }
  OI_ASSIGN(idx, IntsInput(ctx, 1));
  const std::vector<int64_t> st = Strides(data.shape());
  *slice_elems = 1;
  for (int64_t d = batch_dims + k; d < r; ++d) *slice_elems *= data.dim(d);
  int64_t batch = 1;
  for (int64_t d = 0; d < batch_dims; ++d) batch *= data.dim(d);
  const int64_t batch_stride = batch_dims > 0 ? st[static_cast<size_t>(batch_dims - 1)] : 0;
  const int64_t tuples = static_cast<int64_t>(idx.size()) / k;
  const int64_t per_batch = batch > 0 ? tuples / batch : 0;
  std::vector<int64_t> offsets(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = per_batch > 0 ? (t / per_batch) * batch_stride : 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t i = idx[static_cast<size_t>(t * k + j)];
      const int64_t dim = data.dim(batch_dims + j);
      if (!FixIndex(i, dim)) return InvalidArgument(ctx, "index ", i, " is out of range for data dimension ", batch_dims + j, " of size ", dim);
      off += i * st[static_cast<size_t>(batch_dims + j)];
    }
    offsets[static_cast<size_t>(t)] = off;
  }
  return offsets;
}

absl::Status GatherNDKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1}));
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const int64_t batch_dims = ctx.opset() >= 12 ? ctx.node().GetInt("batch_dims", 0) : 0;
  int64_t slice = 0;
  OI_ASSIGN(offsets, NDOffsets(ctx, data, indices, batch_dims, &slice));
  Shape out_shape(indices.shape().begin(), indices.shape().end() - 1);
  out_shape.insert(out_shape.end(), data.shape().begin() + batch_dims + indices.dim(-1), data.shape().end());
  Tensor& out = ctx.AllocateOutput(0, data.dtype(), out_shape);
  return VisitMove(data.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    for (size_t t = 0; t < offsets.size(); ++t) {
      CopyN(out.data<U>() + static_cast<int64_t>(t) * slice, data.data<U>() + offsets[t], slice);
    }
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------------
// Scatter family.

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

absl::Status ScatterCheck(const KernelInit& init) {
  if (init.opset() >= 18) return CheckOneOf(init, "reduction", "none", {"none", "add", "mul", "max", "min"});
  if (init.opset() >= 16) return CheckOneOf(init, "reduction", "none", {"none", "add", "mul"});
  return absl::OkStatus();
}

Reduction GetReduction(const OpContext& ctx) {
  const std::string r = ctx.opset() >= 16 ? ctx.node().GetString("reduction", "none") : "none";
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return Reduction::kNone;
}

template <typename T>
inline void Apply(Reduction red, T& dst, const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    dst = v;
  } else {
    switch (red) {
      case Reduction::kNone: dst = v; break;
      case Reduction::kAdd: dst = static_cast<T>(dst + v); break;
      case Reduction::kMul: dst = static_cast<T>(dst * v); break;
      case Reduction::kMax: if (dst < v) dst = v; break;
      case Reduction::kMin: if (v < dst) dst = v; break;
    }
  }
}

// Dispatches on the real element type when a reduction needs arithmetic, else on the storage unit.
template <typename Fn>
absl::Status VisitScatter(const OpContext& ctx, DType dt, Reduction red, Fn&& fn) {
  if (red == Reduction::kNone) return VisitMove(dt, fn);
  if (dt == DType::kString) return InvalidArgument(ctx, "reduction is not defined for strings");
  return VisitNumeric(dt, fn);
}

absl::Status ScatterNDKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1, 2}));
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  if (updates.dtype() != data.dtype()) return InvalidArgument(ctx, "updates and data have different element types");
  int64_t slice = 0;
  OI_ASSIGN(offsets, NDOffsets(ctx, data, indices, 0, &slice));
  Shape expect(indices.shape().begin(), indices.shape().end() - 1);
  expect.insert(expect.end(), data.shape().begin() + indices.dim(-1), data.shape().end());
  if (updates.shape() != expect) {
    return InvalidArgument(ctx, "updates shape ", ShapeToString(updates.shape()), " != expected ", ShapeToString(expect));
  }
  const Reduction red = GetReduction(ctx);
  Tensor& out = ctx.AllocateOutput(0, data.dtype(), data.shape());
  return VisitScatter(ctx, data.dtype(), red, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* dst = out.data<T>();
    CopyN(dst, data.data<T>(), data.num_elements());
    const T* up = updates.data<T>();
    for (size_t t = 0; t < offsets.size(); ++t) {
      for (int64_t j = 0; j < slice; ++j) Apply(red, dst[offsets[t] + j], up[static_cast<int64_t>(t) * slice + j]);
    }
    return absl::OkStatus();
  });
}

absl::Status ScatterElementsKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1, 2}));
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  if (updates.dtype() != data.dtype()) return InvalidArgument(ctx, "updates and data have different element types");
  if (updates.shape() != indices.shape()) return InvalidArgument(ctx, "updates and indices have different shapes");
  if (data.rank() == 0) return InvalidArgument(ctx, "data must have rank >= 1");
  OI_ASSIGN(axis, Axis(ctx, ctx.node().GetInt("axis", 0), data.rank()));
  OI_ASSIGN(idx, ElementIndices(ctx, data, indices, axis));
  const Reduction red = GetReduction(ctx);
  const std::vector<int64_t> st = Strides(data.shape());
  Tensor& out = ctx.AllocateOutput(0, data.dtype(), data.shape());
  return VisitScatter(ctx, data.dtype(), red, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* dst = out.data<T>();
    CopyN(dst, data.data<T>(), data.num_elements());
    const T* up = updates.data<T>();
    ForEachIndex(indices.shape(), [&](int64_t i, const std::vector<int64_t>& c) {
      int64_t off = 0;
      for (size_t k = 0; k < c.size(); ++k) off += (static_cast<int64_t>(k) == axis ? idx[static_cast<size_t>(i)] : c[k]) * st[k];
      Apply(red, dst[off], up[i]);
    });
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------------------------------------
// OneHot, NonZero, Compress, ReverseSequence, Unique.

// Reads any numeric tensor as int64 values (OneHot accepts float indices and depth).
absl::StatusOr<std::vector<int64_t>> ReadAnyInts(const OpContext& ctx, const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.num_elements()));
  auto s = VisitNumeric(t.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_integral_v<T> || std::is_same_v<T, double> || std::is_same_v<T, float>) {
        v[i] = static_cast<int64_t>(t.data<T>()[i]);
      } else {
        v[i] = static_cast<int64_t>(static_cast<float>(t.data<T>()[i]));
      }
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return InvalidArgument(ctx, s.message());
  return v;
}

absl::Status OneHotKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1, 2}));
  const Tensor& indices = ctx.input(0);
  const Tensor& values = ctx.input(2);
  OI_ASSIGN(depth_v, ReadAnyInts(ctx, ctx.input(1)));
  if (depth_v.size() != 1) return InvalidArgument(ctx, "depth must be a scalar");
  const int64_t depth = depth_v[0];
  if (depth < 1) return InvalidArgument(ctx, "depth must be positive, got ", depth);
  if (values.num_elements() != 2) return InvalidArgument(ctx, "values must have 2 elements");
  const int64_t rank = indices.rank() + 1;
  OI_ASSIGN(axis, Axis(ctx, ctx.node().GetInt("axis", -1), rank));
  OI_ASSIGN(idx, ReadAnyInts(ctx, indices));
  Shape out_shape = indices.shape();
  out_shape.insert(out_shape.begin() + axis, depth);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= indices.shape()[static_cast<size_t>(d)];
  const int64_t inner = outer == 0 ? 0 : indices.num_elements() / outer;
  Tensor& out = ctx.AllocateOutput(0, values.dtype(), out_shape);
  return VisitMove(values.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    U* dst = out.data<U>();
    std::fill(dst, dst + out.num_elements(), values.data<U>()[0]);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        int64_t v = idx[static_cast<size_t>(o * inner + i)];
        if (!FixIndex(v, depth)) continue;  // out-of-range indices give an all-off row
        dst[(o * depth + v) * inner + i] = values.data<U>()[1];
      }
    }
    return absl::OkStatus();
  });
}

template <typename T>
inline bool IsNonZero(const T& v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    return static_cast<float>(v) != 0.0f;
  } else {
    return v != T(0);
  }
}

absl::Status NonZeroKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  std::vector<int64_t> hits;
  auto s = VisitNumeric(in.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* p = in.data<T>();
    for (int64_t i = 0; i < in.num_elements(); ++i) if (IsNonZero(p[i])) hits.push_back(i);
    return absl::OkStatus();
  });
  if (!s.ok()) return InvalidArgument(ctx, s.message());
  const int64_t rank = in.rank(), n = static_cast<int64_t>(hits.size());
  // A scalar is treated as a 1-D tensor of one element, as numpy does.
  const int64_t rows = std::max<int64_t>(rank, 1);
  int64_t* out = ctx.AllocateOutput(0, DType::kInt64, {rows, n}).data<int64_t>();
  const std::vector<int64_t> st = Strides(in.shape());
  for (int64_t j = 0; j < n; ++j) {
    int64_t rem = hits[static_cast<size_t>(j)];
    if (rank == 0) out[j] = 0;
    for (int64_t d = 0; d < rank; ++d) {
      out[d * n + j] = rem / st[static_cast<size_t>(d)];
      rem %= st[static_cast<size_t>(d)];
    }
  }
  return absl::OkStatus();
}

absl::Status CompressKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1}));
  const Tensor& in = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  if (cond.dtype() != DType::kBool || cond.rank() != 1) return InvalidArgument(ctx, "condition must be a 1-D bool tensor");
  const bool has_axis = ctx.node().HasAttr("axis");
  int64_t axis = 0;
  Shape shape = in.shape();
  if (has_axis) {
    OI_ASSIGN(a, Axis(ctx, ctx.node().GetInt("axis", 0), in.rank()));
    axis = a;
  } else {
    shape = {in.num_elements()};  // no axis: the flattened input
  }
  const int64_t dim = shape[static_cast<size_t>(axis)];
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.num_elements(); ++i) {
    if (!cond.data<bool>()[i]) continue;
    if (i >= dim) return InvalidArgument(ctx, "condition selects index ", i, " beyond the dimension ", dim);
    keep.push_back(i);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  Shape out_shape = shape;
  out_shape[static_cast<size_t>(axis)] = static_cast<int64_t>(keep.size());
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), out_shape);
  return VisitMove(in.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    U* dst = out.data<U>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i : keep) {
        CopyN(dst, in.data<U>() + (o * dim + i) * inner, inner);
        dst += inner;
      }
    }
    return absl::OkStatus();
  });
}

absl::Status ReverseSequenceKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0, 1}));
  const Tensor& in = ctx.input(0);
  if (in.rank() < 2) return InvalidArgument(ctx, "input must have rank >= 2");
  const int64_t time_axis = ctx.node().GetInt("time_axis", 0), batch_axis = ctx.node().GetInt("batch_axis", 1);
  if (!((time_axis == 0 && batch_axis == 1) || (time_axis == 1 && batch_axis == 0))) {
    return InvalidArgument(ctx, "time_axis and batch_axis must be 0 and 1");
  }
  OI_ASSIGN(lens, IntsInput(ctx, 1));
  const int64_t T = in.dim(time_axis), B = in.dim(batch_axis);
  if (static_cast<int64_t>(lens.size()) != B) return InvalidArgument(ctx, "sequence_lens has ", lens.size(), " entries for batch ", B);
  for (int64_t l : lens) if (l < 0 || l > T) return InvalidArgument(ctx, "sequence length ", l, " is out of range [0, ", T, "]");
  const int64_t inner = in.num_elements() / std::max<int64_t>(1, T * B);
  const int64_t ts = (time_axis == 0 ? B : 1) * inner, bs = (time_axis == 0 ? 1 : T) * inner;
  Tensor& out = ctx.AllocateOutput(0, in.dtype(), in.shape());
  return VisitMove(in.dtype(), [&](auto tag) -> absl::Status {
    using U = typename decltype(tag)::type;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = lens[static_cast<size_t>(b)];
      for (int64_t t = 0; t < T; ++t) {
        const int64_t from = t < len ? len - 1 - t : t;
        CopyN(out.data<U>() + b * bs + t * ts, in.data<U>() + b * bs + from * ts, inner);
      }
    }
    return absl::OkStatus();
  });
}

absl::Status UniqueKernel(OpContext& ctx) {
  OI_RETURN_IF_ERROR(RequireInputs(ctx, {0}));
  const Tensor& in = ctx.input(0);
  const bool sorted = ctx.node().GetInt("sorted", 1) != 0;
  const bool has_axis = ctx.node().HasAttr("axis");
  int64_t axis = 0;
  Shape shape = {in.num_elements()};
  if (has_axis) {
    if (in.rank() == 0) return InvalidArgument(ctx, "axis given for a scalar input");
    OI_ASSIGN(a, Axis(ctx, ctx.node().GetInt("axis", 0), in.rank()));
    axis = a;
    shape = in.shape();
  }
  const int64_t n = shape[static_cast<size_t>(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t slice = outer * inner;  // elements of one slice along the axis
  return VisitAll(in.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* src = in.data<T>();
    auto at = [&](int64_t i, int64_t e) -> const T& { return src[((e / inner) * n + i) * inner + e % inner]; };
    auto less = [&](int64_t a, int64_t b) {
      for (int64_t e = 0; e < slice; ++e) {
        if (at(a, e) < at(b, e)) return true;
        if (at(b, e) < at(a, e)) return false;
      }
      return false;
    };
    auto equal = [&](int64_t a, int64_t b) { return !less(a, b) && !less(b, a); };
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), less);
    // Groups of equal slices; each keeps its first occurrence (stable sort puts it first).
    std::vector<int64_t> first, count, group_of(static_cast<size_t>(n));
    for (size_t k = 0; k < order.size(); ++k) {
      if (k == 0 || !equal(order[k - 1], order[k])) {
        first.push_back(order[k]);
        count.push_back(0);
      }
      count.back()++;
      group_of[static_cast<size_t>(order[k])] = static_cast<int64_t>(first.size()) - 1;
    }
    std::vector<int64_t> rank_of(first.size());  // group -> output position
    std::vector<int64_t> pos(first.size());
    std::iota(pos.begin(), pos.end(), 0);
    if (!sorted) std::sort(pos.begin(), pos.end(), [&](int64_t a, int64_t b) { return first[static_cast<size_t>(a)] < first[static_cast<size_t>(b)]; });
    for (size_t k = 0; k < pos.size(); ++k) rank_of[static_cast<size_t>(pos[k])] = static_cast<int64_t>(k);
    const int64_t u = static_cast<int64_t>(first.size());
    Shape y_shape = shape;
    y_shape[static_cast<size_t>(axis)] = u;
    T* y = ctx.AllocateOutput(0, in.dtype(), y_shape).template data<T>();
    for (int64_t k = 0; k < u; ++k) {
      const int64_t g = pos[static_cast<size_t>(k)];
      for (int64_t e = 0; e < slice; ++e) y[((e / inner) * u + k) * inner + e % inner] = at(first[static_cast<size_t>(g)], e);
    }
    if (ctx.has_output(1)) {
      int64_t* p = ctx.AllocateOutput(1, DType::kInt64, {u}).data<int64_t>();
      for (int64_t k = 0; k < u; ++k) p[k] = first[static_cast<size_t>(pos[static_cast<size_t>(k)])];
    }
    if (ctx.has_output(2)) {
      int64_t* p = ctx.AllocateOutput(2, DType::kInt64, {n}).data<int64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = rank_of[static_cast<size_t>(group_of[static_cast<size_t>(i)])];
    }
    if (ctx.has_output(3)) {
      int64_t* p = ctx.AllocateOutput(3, DType::kInt64, {u}).data<int64_t>();
      for (int64_t k = 0; k < u; ++k) p[k] = count[static_cast<size_t>(pos[static_cast<size_t>(k)])];
    }
    return absl::OkStatus();
  });
}

}  // namespace

void RegisterTensorOps(KernelRegistry& r) {
  AddVersions(r, "Shape", {1, 13, 15, 19, 21}, ShapeKernel);
  AddVersions(r, "Size", {1, 13, 19, 21}, SizeKernel);
  AddVersions(r, "Identity", {1, 13, 14, 16, 19, 21}, MakeFnKernel(IdentityKernel), /*non_tensors=*/true);
  AddVersions(r, "Reshape", {1, 5, 13, 14, 19, 21}, ReshapeKernel);
  AddVersions(r, "Flatten", {1, 9, 11, 13, 21}, FlattenKernel);
  AddVersions(r, "Squeeze", {1, 11, 13, 21}, SqueezeKernel);
  AddVersions(r, "Unsqueeze", {1, 11, 13, 21}, UnsqueezeKernel);
  AddVersions(r, "Transpose", {1, 13, 21}, TransposeKernel);
  AddVersions(r, "Concat", {1, 4, 11, 13}, ConcatKernel);
  AddVersions(r, "Split", {1, 2, 11, 13, 18}, SplitKernel);
  AddVersions(r, "Slice", {1, 10, 11, 13}, SliceKernel);
  AddVersions(r, "Expand", {8, 13}, ExpandKernel);
  AddVersions(r, "Tile", {1, 6, 13}, TileKernel);
  AddVersions(r, "Pad", {1, 2, 11, 13, 18, 19, 21}, Checked(PadCheck, PadKernel));
  AddVersions(r, "DepthToSpace", {1, 11, 13},
              Checked([](const KernelInit& i) { return i.opset() >= 11 ? CheckOneOf(i, "mode", "DCR", {"DCR", "CRD"}) : absl::OkStatus(); },
                      DepthToSpaceKernel));
  AddVersions(r, "SpaceToDepth", {1, 13}, SpaceToDepthKernel);
  AddVersions(r, "Range", {11}, RangeKernel);
  AddVersions(r, "ConstantOfShape", {9, 20, 21}, Checked(ConstantOfShapeCheck, ConstantOfShapeKernel));
  AddVersions(r, "EyeLike", {9}, EyeLikeKernel);
  AddVersions(r, "Trilu", {14}, TriluKernel);
  AddVersions(r, "Gather", {1, 11, 13}, GatherKernel);
  AddVersions(r, "GatherElements", {11, 13}, GatherElementsKernel);
  AddVersions(r, "GatherND", {11, 12, 13}, GatherNDKernel);
  AddVersions(r, "ScatterND", {11, 13, 16, 18}, Checked(ScatterCheck, ScatterNDKernel));
  AddVersions(r, "ScatterElements", {11, 13, 16, 18}, Checked(ScatterCheck, ScatterElementsKernel));
  r.AddFn("", "Scatter", 9, 10, ScatterElementsKernel);  // deprecated alias of ScatterElements
  AddVersions(r, "OneHot", {9, 11}, OneHotKernel);
  AddVersions(r, "NonZero", {9, 13}, NonZeroKernel);
  AddVersions(r, "Compress", {9, 11}, CompressKernel);
  AddVersions(r, "ReverseSequence", {10}, ReverseSequenceKernel);
  AddVersions(r, "Unique", {11}, UniqueKernel);
}

}  // namespace oneinfer
