// Quantisation operators: reference (plain, exact, per-node) implementations.
//   QuantizeLinear / DequantizeLinear (opsets 10, 13, 19, 21; com.microsoft 1), DynamicQuantizeLinear,
//   MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv. (MatMulInteger and QLinearMatMul with a constant B
//   bind the fused int8 kernel of ops/qdq_matmul.cc when it fits; the functions here stay their reference.)
// Rounding is round-half-to-even (std::nearbyint under the default rounding mode), then the zero point is
// added, then the value saturates to the type's range. Integer products accumulate exactly in int64.
#include <emmintrin.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <limits>

#include "ops/kernel.h"
#include "base/round.h"
#include "base/thread_pool.h"
#include "ops/families.h"
#include "ops/op_util.h"
#include "ops/qdq_matmul.h"

namespace oneinfer {

namespace {

// ---------------------------------------------------------------------------------------------------------
// Quantised element types.

bool IsQuantType(DType t) {
  switch (t) {
    case DType::kInt8: case DType::kUInt8: case DType::kInt16: case DType::kUInt16:
    case DType::kInt4: case DType::kUInt4:
      return true;
    default:
      return false;
  }
}

// True for the types added by opset 21 (16-bit and 4-bit).
bool IsOpset21QuantType(DType t) {
  return t == DType::kInt16 || t == DType::kUInt16 || t == DType::kInt4 || t == DType::kUInt4;
}

void QuantRange(DType t, int64_t* lo, int64_t* hi) {
  switch (t) {
    case DType::kInt8: *lo = -128; *hi = 127; return;
    case DType::kUInt8: *lo = 0; *hi = 255; return;
    case DType::kInt16: *lo = -32768; *hi = 32767; return;
    case DType::kUInt16: *lo = 0; *hi = 65535; return;
    case DType::kInt4: *lo = -8; *hi = 7; return;
    case DType::kUInt4: *lo = 0; *hi = 15; return;
    case DType::kInt32: *lo = std::numeric_limits<int32_t>::min(); *hi = std::numeric_limits<int32_t>::max(); return;
    default: *lo = 0; *hi = 0; return;
  }
}

// ONNX element types this engine has no DType for, by code (for error messages).
const char* UnsupportedTypeName(int64_t code) {
  switch (code) {
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    case 23: return "float4e2m1";
    default: return nullptr;
  }
}

// Reads any integer tensor the quantisation ops take (8/16/32-bit, packed 4-bit) as int32 values.
absl::StatusOr<std::vector<int32_t>> UnpackInts(const Tensor& t) {
  const int64_t n = t.num_elements();
  std::vector<int32_t> v(static_cast<size_t>(n));
  auto copy = [&](auto* p) { for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<int32_t>(p[i]); };
  switch (t.dtype()) {
    case DType::kInt8: copy(t.data<int8_t>()); break;
    case DType::kUInt8: copy(t.data<uint8_t>()); break;
    case DType::kInt16: copy(t.data<int16_t>()); break;
    case DType::kUInt16: copy(t.data<uint16_t>()); break;
    case DType::kInt32: copy(t.data<int32_t>()); break;
    case DType::kInt4:
    case DType::kUInt4: {
      const uint8_t* p = t.data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) {
        int32_t nib = (p[i / 2] >> ((i % 2) * 4)) & 0xF;  // low nibble first
        if (t.dtype() == DType::kInt4 && nib >= 8) nib -= 16;  // sign-extend
        v[static_cast<size_t>(i)] = nib;
      }
      break;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("unsupported quantised element type ", DTypeName(t.dtype())));
  }
  return v;
}

// Writes values already saturated to the range of out's type.
void PackInts(const std::vector<int32_t>& v, Tensor& out) {
  const size_t n = v.size();
  auto put = [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(v[i]);
  };
  switch (out.dtype()) {
    case DType::kInt8: put(out.data<int8_t>()); break;
    case DType::kUInt8: put(out.data<uint8_t>()); break;
    case DType::kInt16: put(out.data<int16_t>()); break;
    case DType::kUInt16: put(out.data<uint16_t>()); break;
    case DType::kInt32: put(out.data<int32_t>()); break;
    case DType::kInt4:
    case DType::kUInt4: {
      uint8_t* p = out.data<uint8_t>();
      std::fill(p, p + StorageBytes(out.dtype(), static_cast<int64_t>(n)), uint8_t{0});
      for (size_t i = 0; i < n; ++i) p[i / 2] |= static_cast<uint8_t>((v[i] & 0xF) << ((i % 2) * 4));
      break;
    }
    default: break;
  }
}

// Reads a float/float16/bfloat16/double tensor as float.
absl::StatusOr<std::vector<float>> ReadFloats(const Tensor& t) {
  if (!IsFloatingPoint(t.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("expected a floating-point tensor, got ", DTypeName(t.dtype())));
  }
  auto f = CastTensor(t, DType::kFloat32);
  if (!f.ok()) return f.status();
  return std::vector<float>(f->data<float>(), f->data<float>() + f->num_elements());
}

// Writes float values into a float32/float16/bfloat16 tensor.
absl::Status WriteFloats(const std::vector<float>& v, Tensor& out) {
  return VisitNumeric(out.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
      T* o = out.data<T>();
      for (size_t i = 0; i < v.size(); ++i) o[i] = static_cast<T>(v[i]);
      return absl::OkStatus();
    } else {
      return absl::InternalError("float output expected");
    }
  });
}

// Rounds half to even, adds the zero point and saturates to [lo, hi].
int32_t Saturate(double q, int64_t lo, int64_t hi) {
  if (std::isnan(q)) return static_cast<int32_t>(std::clamp<int64_t>(0, lo, hi));  // NaN has no integer image
  return static_cast<int32_t>(std::clamp(q, static_cast<double>(lo), static_cast<double>(hi)));
}

// Saturate(nearbyint(v) + zp, lo, hi) for a float quotient v, without the libm call.
int32_t QuantizeValue(float v, int32_t zp, int64_t lo, int64_t hi) {
  return SaturateRounded(v, zp, static_cast<int32_t>(lo), static_cast<int32_t>(hi));
}

// ---------------------------------------------------------------------------------------------------------
// Granularity of a scale / zero point against the quantised tensor: per-tensor, per-axis, or blocked.

struct QuantLayout {
  enum class Mode { kTensor, kAxis, kBlock } mode = Mode::kTensor;
  int64_t len = 1;    // x.dim(axis)
  int64_t inner = 1;  // product of dims after axis
  int64_t block = 0;  // block size (kBlock)
  int64_t blocks = 1; // scale.dim(axis) (kBlock)
  // Index into the scale for element e of x.
  int64_t ScaleIndex(int64_t e) const {
    switch (mode) {
      case Mode::kTensor: return 0;
      case Mode::kAxis: return (e / inner) % len;
      case Mode::kBlock: {
        const int64_t o = e / (len * inner), a = (e / inner) % len, i = e % inner;
        return (o * blocks + a / block) * inner + i;
      }
    }
    return 0;
  }
};

absl::StatusOr<QuantLayout> MakeLayout(const Shape& x, const Tensor& scale, const Tensor* zp, int64_t axis_attr,
                                       int64_t block_size, bool per_axis_allowed) {
  QuantLayout L;
  const Shape& s = scale.shape();
  if (zp != nullptr) {
    const bool both_single = zp->num_elements() == 1 && scale.num_elements() == 1 && zp->rank() <= 1 && scale.rank() <= 1;
    if (zp->shape() != s && !both_single) {
      return absl::InvalidArgumentError(absl::StrCat("zero point shape ", ShapeToString(zp->shape()),
                                                     " does not match scale shape ", ShapeToString(s)));
    }
  }
  if (block_size < 0) return absl::InvalidArgumentError(absl::StrCat("block_size must be >= 0, got ", block_size));
  const int64_t rank = static_cast<int64_t>(x.size());
  if (block_size == 0 && scale.num_elements() == 1 && scale.rank() <= 1) return L;  // per-tensor
  if (!per_axis_allowed) {
    return absl::InvalidArgumentError(absl::StrCat("scale must be a scalar at this opset, got shape ", ShapeToString(s)));
  }
  auto axis = NormalizeAxis(axis_attr, rank);
  if (!axis.ok()) return axis.status();
  L.len = x[static_cast<size_t>(*axis)];
  for (int64_t d = *axis + 1; d < rank; ++d) L.inner *= x[static_cast<size_t>(d)];
  if (block_size == 0) {
    if (scale.rank() != 1 || s[0] != L.len) {
      return absl::InvalidArgumentError(absl::StrCat("per-axis scale must be 1-D of length ", L.len, " (axis ", *axis,
                                                     " of ", ShapeToString(x), "), got shape ", ShapeToString(s)));
    }
    L.mode = QuantLayout::Mode::kAxis;
    return L;
  }
  // Blocked: scale has x's shape except ceil(Di / B) along axis; the last block may be partial (opset 21 spec:
  // block_size must lie in [ceil(Di/Si), ceil(Di/(Si-1))-1], i.e. ceil(Di/B) == Si).
  if (scale.rank() != rank) {
    return absl::InvalidArgumentError(absl::StrCat("blocked quantisation needs a scale of rank ", rank, ", got shape ",
                                                   ShapeToString(s)));
  }
  const int64_t want = (L.len + block_size - 1) / block_size;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t expect = d == *axis ? want : x[static_cast<size_t>(d)];
    if (s[static_cast<size_t>(d)] != expect) {
      return absl::InvalidArgumentError(absl::StrCat("block_size ", block_size, " does not fit scale shape ",
                                                     ShapeToString(s), " for input shape ", ShapeToString(x),
                                                     " along axis ", *axis, " (expected ", expect, " at dim ", d, ")"));
    }
  }
  L.mode = QuantLayout::Mode::kBlock;
  L.block = block_size;
  L.blocks = want;
  return L;
}

// Fast paths of the two loops below for float32 <-> int8/uint8 (per tensor or per axis): the same
// float operations on the tensors' own storage, without the widened copies, split over threads.
// QuantizeValue(x[i] / sc, zp, lo, hi) for i < n, four values at a time on SSE2 (the baseline):
// divps is the same IEEE division as divss, the clamp is the same, cvtps2dq rounds in the MXCSR
// mode like cvtss2si, and a NaN quotient gets QuantizeValue's clamp(0, lo, hi).
template <typename Out>
void QuantizeTensorF32(const float* x, int64_t n, float sc, int32_t zp, int64_t lo, int64_t hi, Out* y) {
  const __m128 s = _mm_set1_ps(sc);
  const __m128 vlo = _mm_set1_ps(static_cast<float>(lo - zp)), vhi = _mm_set1_ps(static_cast<float>(hi - zp));
  const __m128i z = _mm_set1_epi32(zp);
  const __m128i nan_q = _mm_set1_epi32(static_cast<int32_t>(std::clamp<int64_t>(0, lo, hi)));
  int64_t i = 0;
  alignas(16) int32_t q4[4];
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_div_ps(_mm_loadu_ps(x + i), s);
    const __m128i nan = _mm_castps_si128(_mm_cmpunord_ps(v, v));
    const __m128i q = _mm_add_epi32(_mm_cvtps_epi32(_mm_min_ps(_mm_max_ps(v, vlo), vhi)), z);
    _mm_store_si128(reinterpret_cast<__m128i*>(q4), _mm_or_si128(_mm_and_si128(nan, nan_q), _mm_andnot_si128(nan, q)));
    for (int j = 0; j < 4; ++j) y[i + j] = static_cast<Out>(q4[j]);
  }
  for (; i < n; ++i) y[i] = static_cast<Out>(QuantizeValue(x[i] / sc, zp, lo, hi));
}

template <typename Out>
void QuantizeF32(const float* x, int64_t n, const QuantLayout& L, const std::vector<float>& s,
                 const std::vector<int32_t>& z, int64_t lo, int64_t hi, Out* y, ThreadPool* pool) {
  ParallelFor(pool, n, int64_t{1} << 14, [&](int64_t b, int64_t e) {
    if (L.mode == QuantLayout::Mode::kTensor) {
      QuantizeTensorF32(x + b, e - b, s[0], z[0], lo, hi, y + b);
    } else {
      for (int64_t i = b; i < e; ++i) {
        const size_t k = static_cast<size_t>(L.ScaleIndex(i));
        y[i] = static_cast<Out>(QuantizeValue(x[i] / s[k], z[k], lo, hi));
      }
    }
  });
}

template <typename In>
void DequantizeToF32(const In* x, int64_t n, const QuantLayout& L, const std::vector<float>& s,
                     const std::vector<int32_t>& z, float* y, ThreadPool* pool) {
  ParallelFor(pool, n, int64_t{1} << 14, [&](int64_t b, int64_t e) {
    if (L.mode == QuantLayout::Mode::kTensor) {
      const float sc = s[0], zp = static_cast<float>(z[0]);
      for (int64_t i = b; i < e; ++i) y[i] = (static_cast<float>(x[i]) - zp) * sc;
    } else {
      for (int64_t i = b; i < e; ++i) {
        const size_t k = static_cast<size_t>(L.ScaleIndex(i));
        y[i] = (static_cast<float>(x[i]) - static_cast<float>(z[k])) * s[k];
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------------------
// QuantizeLinear

struct QDQAttrs {
  int64_t axis = 1;
  int64_t block_size = 0;
  bool per_axis = false;     // opset >= 13 (and com.microsoft)
  bool wide_types = false;   // 16-bit and 4-bit types (opset 21, com.microsoft)
  DType output_dtype = DType::kUndefined;
};

absl::StatusOr<QDQAttrs> ReadQDQAttrs(const KernelInit& init, bool quantize) {
  const Node& n = init.node();
  const bool ms = CanonicalDomain(n.domain) == "com.microsoft";
  QDQAttrs a;
  a.per_axis = ms || init.opset() >= 13;
  a.wide_types = ms || init.opset() >= 21;
  if (a.per_axis) a.axis = n.GetInt("axis", 1);
  if (init.opset() >= 21 && !ms) a.block_size = n.GetInt("block_size", 0);
  if (a.block_size < 0) return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": block_size must be positive, got ", a.block_size));
  if (quantize && init.opset() >= 21 && !ms && n.HasAttr("output_dtype")) {
    const int64_t code = n.GetInt("output_dtype", 0);
    if (code != 0) {
      if (const char* f8 = UnsupportedTypeName(code)) return Unimplemented(n, "output_dtype ", f8, " is not supported");
      const DType t = static_cast<DType>(code);
      if (!IsQuantType(t)) return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": output_dtype ", code, " (", DTypeName(t), ") is not a quantised type"));
      a.output_dtype = t;
    }
  }
  if (quantize && init.opset() >= 23 && !ms) {
    // The kernel divides in float32: precision 0 (the scale's type) is what opset 21 did, 1 is float32.
    const int64_t precision = n.GetInt("precision", 0);
    if (precision != 0 && precision != 1) {
      const char* name = UnsupportedTypeName(precision);
      return Unimplemented(n, "precision ", precision, " (", name ? name : DTypeName(static_cast<DType>(precision)),
                           ") is not implemented (0 or 1: float32)");
    }
  }
  if (!quantize && init.opset() >= 23 && !ms && n.GetInt("output_dtype", 0) != 0) {
    // DequantizeLinear-23's output_dtype: only the scale's own type is implemented (checked at run time).
    const int64_t code = n.GetInt("output_dtype", 0);
    if (const char* f = UnsupportedTypeName(code)) return Unimplemented(n, "output_dtype ", f, " is not supported");
    const DType t = static_cast<DType>(code);
    if (t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kBFloat16)
      return absl::InvalidArgumentError(
          absl::StrCat(n.Describe(), ": output_dtype ", code, " must be float, float16 or bfloat16"));
    a.output_dtype = t;
  }
  return a;
}

class QuantizeLinearKernel : public OpKernel {
 public:
  explicit QuantizeLinearKernel(QDQAttrs a) : a_(a) {}
  absl::Status Compute(OpContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "x and y_scale are required");
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    const DType xt = x.dtype();
    if (!(IsFloatingPoint(xt) || xt == DType::kInt32) || xt == DType::kFloat64) {
      return InvalidArgument(ctx, "x must be float, float16, bfloat16 or int32, got ", DTypeName(xt));
    }
    if (!IsFloatingPoint(scale.dtype())) return InvalidArgument(ctx, "y_scale must be floating point, got ", DTypeName(scale.dtype()));
    DType out_t = a_.output_dtype != DType::kUndefined ? a_.output_dtype : DType::kUInt8;
    if (zp != nullptr) {
      if (!IsQuantType(zp->dtype())) return InvalidArgument(ctx, "unsupported y_zero_point type ", DTypeName(zp->dtype()));
      if (a_.output_dtype != DType::kUndefined && zp->dtype() != a_.output_dtype) {
        return InvalidArgument(ctx, "y_zero_point type ", DTypeName(zp->dtype()), " differs from output_dtype ",
                               DTypeName(a_.output_dtype));
      }
      out_t = zp->dtype();
    }
    if (IsOpset21QuantType(out_t) && !a_.wide_types) {
      return InvalidArgument(ctx, "quantised type ", DTypeName(out_t), " needs opset 21");
    }
    auto L = MakeLayout(x.shape(), scale, zp, a_.axis, a_.block_size, a_.per_axis);
    if (!L.ok()) return InvalidArgument(ctx, L.status().message());
    auto sv = ReadFloats(scale);
    if (!sv.ok()) return InvalidArgument(ctx, sv.status().message());
    for (float s : *sv) {
      if (s == 0.0f || !std::isfinite(s)) return InvalidArgument(ctx, "y_scale must be finite and non-zero, got ", s);
    }
    std::vector<int32_t> zv(sv->size(), 0);
    if (zp != nullptr) {
      auto z = UnpackInts(*zp);
      if (!z.ok()) return InvalidArgument(ctx, z.status().message());
      zv = std::move(*z);
    }
    int64_t lo, hi;
    QuantRange(out_t, &lo, &hi);
    const int64_t n = x.num_elements();
    if (xt == DType::kFloat32 && (out_t == DType::kInt8 || out_t == DType::kUInt8) &&
        L->mode != QuantLayout::Mode::kBlock) {
      Tensor& y = ctx.AllocateOutputUninitialized(0, out_t, x.shape());
      if (out_t == DType::kInt8) QuantizeF32(x.data<float>(), n, *L, *sv, zv, lo, hi, y.data<int8_t>(), ctx.thread_pool());
      else QuantizeF32(x.data<float>(), n, *L, *sv, zv, lo, hi, y.data<uint8_t>(), ctx.thread_pool());
      return absl::OkStatus();
    }
    std::vector<int32_t> q(static_cast<size_t>(n));
    if (xt == DType::kInt32) {
      // int32 input: divide in double (exact for every int32 numerator).
      const int32_t* xp = x.data<int32_t>();
      for (int64_t e = 0; e < n; ++e) {
        const size_t k = static_cast<size_t>(L->ScaleIndex(e));
        q[static_cast<size_t>(e)] = Saturate(std::nearbyint(static_cast<double>(xp[e]) / (*sv)[k]) + zv[k], lo, hi);
      }
    } else {
      auto xv = ReadFloats(x);
      if (!xv.ok()) return InvalidArgument(ctx, xv.status().message());
      // float input: the quotient is rounded to float first, as the reference computes x / y_scale in float.
      for (int64_t e = 0; e < n; ++e) {
        const size_t k = static_cast<size_t>(L->ScaleIndex(e));
        const float r = std::nearbyint((*xv)[static_cast<size_t>(e)] / (*sv)[k]);
        q[static_cast<size_t>(e)] = Saturate(static_cast<double>(r) + zv[k], lo, hi);
      }
    }
    Tensor& y = ctx.AllocateOutput(0, out_t, x.shape());
    PackInts(q, y);
    return absl::OkStatus();
  }

 private:
  QDQAttrs a_;
};

class DequantizeLinearKernel : public OpKernel {
 public:
  DequantizeLinearKernel(QDQAttrs a, int64_t opset, bool ms) : a_(a), opset_(opset), ms_(ms) {}
  absl::Status Compute(OpContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "x and x_scale are required");
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    const DType xt = x.dtype();
    if (!IsQuantType(xt) && xt != DType::kInt32) return InvalidArgument(ctx, "unsupported x type ", DTypeName(xt));
    if (IsOpset21QuantType(xt) && !a_.wide_types) return InvalidArgument(ctx, "x type ", DTypeName(xt), " needs opset 21");
    if (zp != nullptr && zp->dtype() != xt) {
      return InvalidArgument(ctx, "x_zero_point type ", DTypeName(zp->dtype()), " differs from x type ", DTypeName(xt));
    }
    const DType st = scale.dtype();
    const bool float_only = opset_ < 19 && !ms_;
    if (!(st == DType::kFloat32 || (!float_only && (st == DType::kFloat16 || st == DType::kBFloat16)))) {
      return InvalidArgument(ctx, "x_scale type ", DTypeName(st), " is not allowed at opset ", opset_);
    }
    if (a_.output_dtype != DType::kUndefined && a_.output_dtype != st) {
      return Unimplemented(ctx.node(), "output_dtype ", DTypeName(a_.output_dtype), " differs from x_scale's type ", DTypeName(st),
                           "; only the scale's type is implemented");
    }
    auto L = MakeLayout(x.shape(), scale, zp, a_.axis, a_.block_size, a_.per_axis);
    if (!L.ok()) return InvalidArgument(ctx, L.status().message());
    auto sv = ReadFloats(scale);
    if (!sv.ok()) return InvalidArgument(ctx, sv.status().message());
    std::vector<int32_t> zv(sv->size(), 0);
    if (zp != nullptr) {
      auto z = UnpackInts(*zp);
      if (!z.ok()) return InvalidArgument(ctx, z.status().message());
      zv = std::move(*z);
    }
    const int64_t n = x.num_elements();
    if ((xt == DType::kInt8 || xt == DType::kUInt8) && st == DType::kFloat32 && L->mode != QuantLayout::Mode::kBlock) {
      float* y = ctx.AllocateOutputUninitialized(0, st, x.shape()).data<float>();
      if (xt == DType::kInt8) DequantizeToF32(x.data<int8_t>(), n, *L, *sv, zv, y, ctx.thread_pool());
      else DequantizeToF32(x.data<uint8_t>(), n, *L, *sv, zv, y, ctx.thread_pool());
      return absl::OkStatus();
    }
    auto xv = UnpackInts(x);
    if (!xv.ok()) return InvalidArgument(ctx, xv.status().message());
    std::vector<float> y(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) {
      const size_t k = static_cast<size_t>(L->ScaleIndex(e));
      // (float(x) - float(zp)) * scale, as the reference computes it.
      y[static_cast<size_t>(e)] = (static_cast<float>((*xv)[static_cast<size_t>(e)]) - static_cast<float>(zv[k])) * (*sv)[k];
    }
    return WriteFloats(y, ctx.AllocateOutput(0, st, x.shape()));
  }

 private:
  QDQAttrs a_;
  int64_t opset_;
  bool ms_;
};

// ---------------------------------------------------------------------------------------------------------
// DynamicQuantizeLinear (uint8)

absl::Status DynamicQuantizeLinear(OpContext& ctx) {
  if (!ctx.has_input(0)) return InvalidArgument(ctx, "x is required");
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kFloat32) return InvalidArgument(ctx, "x must be float32, got ", DTypeName(x.dtype()));
  const float* xp = x.data<float>();
  const int64_t n = x.num_elements();
  float xmin = 0.0f, xmax = 0.0f;  // the range always includes 0
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(xp[i])) return InvalidArgument(ctx, "x contains NaN");
    xmin = std::min(xmin, xp[i]);
    xmax = std::max(xmax, xp[i]);
  }
  // All-zero (or empty) input: the range is taken as 1 (ONNX reference implementation), so y = 0, zp = 0.
  const float scale = (xmax == xmin ? 1.0f : xmax - xmin) / 255.0f;
  if (!std::isfinite(scale)) return InvalidArgument(ctx, "x range overflows float: scale is ", scale);
  const float zpf = std::nearbyint(std::clamp(0.0f - xmin / scale, 0.0f, 255.0f));
  const int32_t zp = static_cast<int32_t>(zpf);
  Tensor& y = ctx.AllocateOutput(0, DType::kUInt8, x.shape());
  uint8_t* yp = y.data<uint8_t>();
  for (int64_t i = 0; i < n; ++i) yp[i] = static_cast<uint8_t>(QuantizeValue(xp[i] / scale, zp, 0, 255));
  if (ctx.has_output(1)) ctx.AllocateOutput(1, DType::kFloat32, {}).data<float>()[0] = scale;
  if (ctx.has_output(2)) ctx.AllocateOutput(2, DType::kUInt8, {}).data<uint8_t>()[0] = static_cast<uint8_t>(zp);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------------------
// Integer matrix multiplication shared by MatMulInteger and QLinearMatMul.

bool Is8Bit(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }

// Zero point (or scale) given per tensor (1 element) or per row/column (`count` elements, 1-D).
absl::Status CheckPerTensorOrVector(const OpContext& ctx, const Tensor& t, int64_t count, const char* what) {
  if (t.num_elements() == 1 && t.rank() <= 1) return absl::OkStatus();
  if (t.rank() == 1 && t.dim(0) == count) return absl::OkStatus();
  return InvalidArgument(ctx, what, " must be a scalar or 1-D of length ", count, ", got shape ", ShapeToString(t.shape()));
}

struct IntMatMulResult {
  Shape shape;                 // output shape
  int64_t M = 0, N = 0;        // matrix dims (1 for a dropped vector dim)
  std::vector<int32_t> acc;    // int32 results (wrapping like int32 accumulation)
};

// acc = (a - a_zp[row]) @ (b - b_zp[col]) with MatMul's rank rules and batch broadcasting.
absl::StatusOr<IntMatMulResult> IntMatMul(const OpContext& ctx, const Tensor& a, const Tensor& b,
                                          const std::vector<int32_t>& azp, const std::vector<int32_t>& bzp) {
  if (a.rank() < 1 || b.rank() < 1) return InvalidArgument(ctx, "MatMul inputs must have rank >= 1");
  Shape as = a.shape(), bs = b.shape();
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K) {
    return InvalidArgument(ctx, "inner dimensions differ: ", ShapeToString(a.shape()), " x ", ShapeToString(b.shape()));
  }
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  auto batch = BroadcastShapes({ab, bb});
  if (!batch.ok()) return InvalidArgument(ctx, batch.status().message());
  IntMatMulResult r;
  r.M = M;
  r.N = N;
  r.shape = *batch;
  if (!a_vec) r.shape.push_back(M);
  if (!b_vec) r.shape.push_back(N);
  auto av = UnpackInts(a);
  auto bv = UnpackInts(b);
  if (!av.ok() || !bv.ok()) return InvalidArgument(ctx, "unsupported integer input types");
  const int64_t nb = NumElements(*batch);
  const std::vector<int64_t> os = Strides(*batch), sa = BroadcastStrides(ab, *batch), sb = BroadcastStrides(bb, *batch);
  r.acc.assign(static_cast<size_t>(nb * M * N), 0);
  auto zp_at = [](const std::vector<int32_t>& z, int64_t i) -> int64_t { return z.empty() ? 0 : z[z.size() == 1 ? 0 : static_cast<size_t>(i)]; };
  ParallelFor(ctx.thread_pool(), nb * M, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t bi = row / M, m = row % M;
      int64_t ia = 0, ib = 0, rem = bi;
      for (size_t d = 0; d < os.size(); ++d) {
        const int64_t c = rem / os[d];
        rem %= os[d];
        ia += c * sa[d];
        ib += c * sb[d];
      }
      const int32_t* ap = av->data() + (ia * M + m) * K;
      const int32_t* bp = bv->data() + ib * K * N;
      const int64_t za = zp_at(azp, m);
      for (int64_t n = 0; n < N; ++n) {
        const int64_t zb = zp_at(bzp, n);
        int64_t s = 0;
        for (int64_t k = 0; k < K; ++k) s += (ap[k] - za) * (bp[k * N + n] - zb);
        r.acc[static_cast<size_t>(row * N + n)] = static_cast<int32_t>(s);  // int32 result, modulo 2^32
      }
    }
  });
  return r;
}

absl::StatusOr<std::vector<int32_t>> OptionalZeroPoint(const OpContext& ctx, size_t i, DType expect, int64_t count,
                                                       const char* what) {
  if (!ctx.has_input(i)) return std::vector<int32_t>{};
  const Tensor& z = ctx.input(i);
  if (z.dtype() != expect) {
    return InvalidArgument(ctx, what, " type ", DTypeName(z.dtype()), " differs from its input's type ", DTypeName(expect));
  }
  if (auto s = CheckPerTensorOrVector(ctx, z, count, what); !s.ok()) return s;
  return UnpackInts(z);
}

// Matrix dims of a MatMul operand (M of a, N of b) for validating per-row / per-column parameters.
int64_t RowsOf(const Tensor& a) { return a.rank() >= 2 ? a.dim(-2) : 1; }
int64_t ColsOf(const Tensor& b) { return b.rank() >= 2 ? b.dim(-1) : 1; }

absl::Status MatMulInteger(OpContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "A and B are required");
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (!Is8Bit(a.dtype()) || !Is8Bit(b.dtype())) {
    return InvalidArgument(ctx, "A and B must be int8 or uint8, got ", DTypeName(a.dtype()), " and ", DTypeName(b.dtype()));
  }
  auto azp = OptionalZeroPoint(ctx, 2, a.dtype(), RowsOf(a), "a_zero_point");
  if (!azp.ok()) return azp.status();
  auto bzp = OptionalZeroPoint(ctx, 3, b.dtype(), ColsOf(b), "b_zero_point");
  if (!bzp.ok()) return bzp.status();
  auto r = IntMatMul(ctx, a, b, *azp, *bzp);
  if (!r.ok()) return r.status();
  Tensor& y = ctx.AllocateOutput(0, DType::kInt32, r->shape);
  std::copy(r->acc.begin(), r->acc.end(), y.data<int32_t>());
  return absl::OkStatus();
}

// Scale given per tensor or as a 1-D vector of `count`; returned as floats.
absl::StatusOr<std::vector<float>> ScaleVector(const OpContext& ctx, size_t i, int64_t count, const char* what,
                                               bool float32_only) {
  if (!ctx.has_input(i)) return InvalidArgument(ctx, what, " is required");
  const Tensor& s = ctx.input(i);
  if (float32_only ? s.dtype() != DType::kFloat32 : !IsFloatingPoint(s.dtype())) {
    return InvalidArgument(ctx, what, " has unsupported type ", DTypeName(s.dtype()));
  }
  if (auto st = CheckPerTensorOrVector(ctx, s, count, what); !st.ok()) return st;
  return ReadFloats(s);
}

float At(const std::vector<float>& v, int64_t i) { return v[v.size() == 1 ? 0 : static_cast<size_t>(i)]; }
int32_t At(const std::vector<int32_t>& v, int64_t i) { return v.empty() ? 0 : v[v.size() == 1 ? 0 : static_cast<size_t>(i)]; }

// y = saturate(round(acc * float(sa * sb / sy)) + zy); the product is taken in double like the reference.
int32_t Requantize(int32_t acc, float sa, float sb, float sy, int32_t zy, int64_t lo, int64_t hi) {
  const float mult = sa * sb / sy;
  return SaturateRounded(static_cast<double>(acc) * static_cast<double>(mult), zy, static_cast<int32_t>(lo),
                         static_cast<int32_t>(hi));
}

absl::Status QLinearMatMul(OpContext& ctx) {
  for (size_t i : {0, 1, 3, 4, 6}) if (!ctx.has_input(i)) return InvalidArgument(ctx, "input ", i, " is required");
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  if (!Is8Bit(a.dtype()) || !Is8Bit(b.dtype())) {
    return InvalidArgument(ctx, "a and b must be int8 or uint8, got ", DTypeName(a.dtype()), " and ", DTypeName(b.dtype()));
  }
  const bool f32 = ctx.opset() < 21;
  const int64_t M = RowsOf(a), N = ColsOf(b);
  auto sa = ScaleVector(ctx, 1, M, "a_scale", f32);
  if (!sa.ok()) return sa.status();
  auto sb = ScaleVector(ctx, 4, N, "b_scale", f32);
  if (!sb.ok()) return sb.status();
  auto sy = ScaleVector(ctx, 6, M, "y_scale", f32);
  if (!sy.ok()) return sy.status();
  for (float s : *sy) if (s == 0.0f || !std::isfinite(s)) return InvalidArgument(ctx, "y_scale must be finite and non-zero, got ", s);
  auto azp = OptionalZeroPoint(ctx, 2, a.dtype(), M, "a_zero_point");
  if (!azp.ok()) return azp.status();
  auto bzp = OptionalZeroPoint(ctx, 5, b.dtype(), N, "b_zero_point");
  if (!bzp.ok()) return bzp.status();
  // The output type is y_zero_point's (a's when absent).
  DType yt = a.dtype();
  std::vector<int32_t> yzp;
  if (ctx.has_input(7)) {
    const Tensor& z = ctx.input(7);
    if (!Is8Bit(z.dtype())) return InvalidArgument(ctx, "y_zero_point must be int8 or uint8, got ", DTypeName(z.dtype()));
    if (auto s = CheckPerTensorOrVector(ctx, z, M, "y_zero_point"); !s.ok()) return s;
    yt = z.dtype();
    auto zv = UnpackInts(z);
    if (!zv.ok()) return zv.status();
    yzp = std::move(*zv);
  }
  auto r = IntMatMul(ctx, a, b, *azp, *bzp);
  if (!r.ok()) return r.status();
  int64_t lo, hi;
  QuantRange(yt, &lo, &hi);
  std::vector<int32_t> q(r->acc.size());
  for (size_t e = 0; e < q.size(); ++e) {
    const int64_t n = static_cast<int64_t>(e) % r->N, m = (static_cast<int64_t>(e) / r->N) % r->M;
    q[e] = Requantize(r->acc[e], At(*sa, m), At(*sb, n), At(*sy, m), At(yzp, m), lo, hi);
  }
  PackInts(q, ctx.AllocateOutput(0, yt, r->shape));
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------------------
// Integer convolution shared by ConvInteger and QLinearConv.

struct ConvAttrs {
  std::string auto_pad;
  std::vector<int64_t> dilations, kernel_shape, pads, strides;
  int64_t group = 1;
};

absl::StatusOr<ConvAttrs> ReadConvAttrs(const Node& n) {
  ConvAttrs c;
  c.auto_pad = n.GetString("auto_pad", "NOTSET");
  if (c.auto_pad != "NOTSET" && c.auto_pad != "SAME_UPPER" && c.auto_pad != "SAME_LOWER" && c.auto_pad != "VALID") {
    return Unimplemented(n, "unsupported auto_pad '", c.auto_pad, "'");
  }
  c.dilations = n.GetInts("dilations");
  c.kernel_shape = n.GetInts("kernel_shape");
  c.pads = n.GetInts("pads");
  c.strides = n.GetInts("strides");
  c.group = n.GetInt("group", 1);
  if (c.group < 1) return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": group must be >= 1"));
  return c;
}

struct IntConvResult {
  Shape shape;               // [N, M, out spatial...]
  std::vector<int32_t> acc;  // int32 results
};

// acc = conv(x - x_zp, w - w_zp[m]) (+ bias[m]), zero padding in the shifted domain.
absl::StatusOr<IntConvResult> IntConv(const OpContext& ctx, const ConvAttrs& c, const Tensor& x, const Tensor& w,
                                      int32_t xzp, const std::vector<int32_t>& wzp, const std::vector<int32_t>& bias) {
  if (x.rank() < 3 || w.rank() != x.rank()) {
    return InvalidArgument(ctx, "x must have rank >= 3 and W the same rank, got ", ShapeToString(x.shape()), " and ",
                           ShapeToString(w.shape()));
  }
  const size_t nd = static_cast<size_t>(x.rank() - 2);
  const int64_t N = x.dim(0), C = x.dim(1), M = w.dim(0), CG = w.dim(1), G = c.group;
  if (C != CG * G || M % G != 0) {
    return InvalidArgument(ctx, "channel mismatch: x has ", C, " channels, W is ", ShapeToString(w.shape()), ", group ", G);
  }
  auto chk = [&](const std::vector<int64_t>& v, size_t n, const char* what) -> absl::Status {
    if (!v.empty() && v.size() != n) return InvalidArgument(ctx, what, " has ", v.size(), " values, expected ", n);
    return absl::OkStatus();
  };
  for (auto s : {chk(c.dilations, nd, "dilations"), chk(c.strides, nd, "strides"), chk(c.kernel_shape, nd, "kernel_shape"),
                 chk(c.pads, 2 * nd, "pads")}) {
    if (!s.ok()) return s;
  }
  Shape in(nd), k(nd), out(nd);
  std::vector<int64_t> dil(nd, 1), str(nd, 1), pb(nd, 0), pe(nd, 0);
  for (size_t i = 0; i < nd; ++i) {
    in[i] = x.dim(static_cast<int64_t>(i) + 2);
    k[i] = w.dim(static_cast<int64_t>(i) + 2);
    if (!c.kernel_shape.empty() && c.kernel_shape[i] != k[i]) return InvalidArgument(ctx, "kernel_shape does not match W");
    if (!c.dilations.empty()) dil[i] = c.dilations[i];
    if (!c.strides.empty()) str[i] = c.strides[i];
    if (dil[i] < 1 || str[i] < 1) return InvalidArgument(ctx, "strides and dilations must be >= 1");
    const int64_t ek = (k[i] - 1) * dil[i] + 1;
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      out[i] = (in[i] + str[i] - 1) / str[i];
      const int64_t total = std::max<int64_t>(0, (out[i] - 1) * str[i] + ek - in[i]);
      pb[i] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[i] = total - pb[i];
    } else {
      if (c.auto_pad == "NOTSET" && !c.pads.empty()) {
        pb[i] = c.pads[i];
        pe[i] = c.pads[i + nd];
        if (pb[i] < 0 || pe[i] < 0) return InvalidArgument(ctx, "pads must be >= 0");
      }
      out[i] = (in[i] + pb[i] + pe[i] - ek) / str[i] + 1;
    }
    if (out[i] < 1) return InvalidArgument(ctx, "the kernel does not fit the padded input");
  }
  if (!bias.empty() && static_cast<int64_t>(bias.size()) != M) return InvalidArgument(ctx, "B must have ", M, " values");
  auto xv = UnpackInts(x);
  auto wv = UnpackInts(w);
  if (!xv.ok() || !wv.ok()) return InvalidArgument(ctx, "unsupported integer input types");
  IntConvResult r;
  r.shape = {N, M};
  r.shape.insert(r.shape.end(), out.begin(), out.end());
  const int64_t in_size = NumElements(in), out_size = NumElements(out), k_size = NumElements(k);
  r.acc.assign(static_cast<size_t>(N * M * out_size), 0);
  const int64_t MG = M / G;
  // Offsets of each kernel tap: per spatial dim, coordinate * dilation.
  std::vector<std::vector<int64_t>> tap(static_cast<size_t>(k_size), std::vector<int64_t>(nd));
  for (int64_t t = 0; t < k_size; ++t) {
    int64_t rem = t;
    for (size_t i = nd; i-- > 0;) {
      tap[static_cast<size_t>(t)][i] = (rem % k[i]) * dil[i];
      rem /= k[i];
    }
  }
  ParallelFor(ctx.thread_pool(), N * M, 1, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> o(nd), base(nd);
    for (int64_t nm = begin; nm < end; ++nm) {
      const int64_t n = nm / M, m = nm % M, g = m / MG;
      const int64_t zw = wzp.empty() ? 0 : wzp[wzp.size() == 1 ? 0 : static_cast<size_t>(m)];
      for (int64_t op = 0; op < out_size; ++op) {
        int64_t rem = op;
        for (size_t i = nd; i-- > 0;) {
          o[i] = rem % out[i];
          rem /= out[i];
          base[i] = o[i] * str[i] - pb[i];
        }
        int64_t s = bias.empty() ? 0 : bias[static_cast<size_t>(m)];
        for (int64_t cg = 0; cg < CG; ++cg) {
          const int32_t* xp = xv->data() + (n * C + g * CG + cg) * in_size;
          const int32_t* wp = wv->data() + (m * CG + cg) * k_size;
          for (int64_t t = 0; t < k_size; ++t) {
            int64_t idx = 0;
            bool inside = true;
            for (size_t i = 0; i < nd && inside; ++i) {
              const int64_t p = base[i] + tap[static_cast<size_t>(t)][i];
              inside = p >= 0 && p < in[i];
              idx = idx * in[i] + p;
            }
            if (inside) s += (static_cast<int64_t>(xp[idx]) - xzp) * (wp[t] - zw);  // padding contributes 0
          }
        }
        r.acc[static_cast<size_t>(nm * out_size + op)] = static_cast<int32_t>(s);
      }
    }
  });
  return r;
}

absl::StatusOr<std::unique_ptr<OpKernel>> MakeConvInteger(const KernelInit& init) {
  auto attrs = ReadConvAttrs(init.node());
  if (!attrs.ok()) return attrs.status();
  return MakeFnKernel([c = *attrs](OpContext& ctx) -> absl::Status {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "x and w are required");
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    if (!Is8Bit(x.dtype()) || !Is8Bit(w.dtype())) {
      return InvalidArgument(ctx, "x and w must be int8 or uint8, got ", DTypeName(x.dtype()), " and ", DTypeName(w.dtype()));
    }
    auto xzp = OptionalZeroPoint(ctx, 2, x.dtype(), 1, "x_zero_point");
    if (!xzp.ok()) return xzp.status();
    auto wzp = OptionalZeroPoint(ctx, 3, w.dtype(), w.rank() > 0 ? w.dim(0) : 1, "w_zero_point");
    if (!wzp.ok()) return wzp.status();
    auto r = IntConv(ctx, c, x, w, xzp->empty() ? 0 : (*xzp)[0], *wzp, {});
    if (!r.ok()) return r.status();
    Tensor& y = ctx.AllocateOutput(0, DType::kInt32, r->shape);
    std::copy(r->acc.begin(), r->acc.end(), y.data<int32_t>());
    return absl::OkStatus();
  })(init);
}

absl::StatusOr<std::unique_ptr<OpKernel>> MakeQLinearConv(const KernelInit& init) {
  auto attrs = ReadConvAttrs(init.node());
  if (!attrs.ok()) return attrs.status();
  return MakeFnKernel([c = *attrs](OpContext& ctx) -> absl::Status {
    for (size_t i : {0, 1, 3, 4, 6}) if (!ctx.has_input(i)) return InvalidArgument(ctx, "input ", i, " is required");
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(3);
    if (!Is8Bit(x.dtype()) || !Is8Bit(w.dtype())) {
      return InvalidArgument(ctx, "x and w must be int8 or uint8, got ", DTypeName(x.dtype()), " and ", DTypeName(w.dtype()));
    }
    const int64_t M = w.rank() > 0 ? w.dim(0) : 1;
    auto sx = ScaleVector(ctx, 1, 1, "x_scale", true);
    if (!sx.ok()) return sx.status();
    auto sw = ScaleVector(ctx, 4, M, "w_scale", true);
    if (!sw.ok()) return sw.status();
    auto sy = ScaleVector(ctx, 6, 1, "y_scale", true);
    if (!sy.ok()) return sy.status();
    if ((*sy)[0] == 0.0f || !std::isfinite((*sy)[0])) return InvalidArgument(ctx, "y_scale must be finite and non-zero, got ", (*sy)[0]);
    auto xzp = OptionalZeroPoint(ctx, 2, x.dtype(), 1, "x_zero_point");
    if (!xzp.ok()) return xzp.status();
    auto wzp = OptionalZeroPoint(ctx, 5, w.dtype(), M, "w_zero_point");
    if (!wzp.ok()) return wzp.status();
    DType yt = x.dtype();
    int32_t yzp = 0;
    if (ctx.has_input(7)) {
      const Tensor& z = ctx.input(7);
      if (!Is8Bit(z.dtype())) return InvalidArgument(ctx, "y_zero_point must be int8 or uint8, got ", DTypeName(z.dtype()));
      if (auto s = CheckPerTensorOrVector(ctx, z, 1, "y_zero_point"); !s.ok()) return s;
      yt = z.dtype();
      yzp = (*UnpackInts(z))[0];
    }
    std::vector<int32_t> bias;
    if (ctx.has_input(8)) {
      const Tensor& bt = ctx.input(8);
      if (bt.dtype() != DType::kInt32 || bt.rank() != 1) return InvalidArgument(ctx, "B must be a 1-D int32 tensor");
      bias.assign(bt.data<int32_t>(), bt.data<int32_t>() + bt.num_elements());
    }
    auto r = IntConv(ctx, c, x, w, xzp->empty() ? 0 : (*xzp)[0], *wzp, bias);
    if (!r.ok()) return r.status();
    int64_t lo, hi;
    QuantRange(yt, &lo, &hi);
    const int64_t out_size = NumElements(Shape(r->shape.begin() + 2, r->shape.end()));
    std::vector<int32_t> q(r->acc.size());
    for (size_t e = 0; e < q.size(); ++e) {
      const int64_t m = (static_cast<int64_t>(e) / out_size) % M;
      q[e] = Requantize(r->acc[e], (*sx)[0], At(*sw, m), (*sy)[0], yzp, lo, hi);
    }
    PackInts(q, ctx.AllocateOutput(0, yt, r->shape));
    return absl::OkStatus();
  })(init);
}

// A constant B that fits the fused int8 kernel (ops/qdq_matmul.cc) binds it; everything else
// (and every malformed input, which the reference reports) runs the reference function.
KernelFactory BindConstantWeight(std::unique_ptr<OpKernel> (*fused)(const KernelInit&), KernelFn reference) {
  return [fused, reference](const KernelInit& init) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    if (auto k = fused(init)) return k;
    return MakeFnKernel(reference)(init);
  };
}

KernelFactory QDQFactory(bool quantize) {
  return [quantize](const KernelInit& init) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    auto a = ReadQDQAttrs(init, quantize);
    if (!a.ok()) return a.status();
    if (quantize) return std::unique_ptr<OpKernel>(new QuantizeLinearKernel(*a));
    const bool ms = CanonicalDomain(init.node().domain) == "com.microsoft";
    return std::unique_ptr<OpKernel>(new DequantizeLinearKernel(*a, init.opset(), ms));
  };
}

}  // namespace

void RegisterQuantizeOps(KernelRegistry& r) {
  for (bool q : {true, false}) {
    const char* op = q ? "QuantizeLinear" : "DequantizeLinear";
    AddVersions(r, op, {10, 13, 19, 21, 23}, QDQFactory(q));
    r.Add("com.microsoft", op, 1, 1, QDQFactory(q));
  }
  AddVersions(r, "DynamicQuantizeLinear", {11}, DynamicQuantizeLinear);
  AddVersions(r, "MatMulInteger", {10}, BindConstantWeight(MakeFusedMatMulInteger, MatMulInteger));
  AddVersions(r, "QLinearMatMul", {10, 21}, BindConstantWeight(MakeFusedQLinearMatMul, QLinearMatMul));
  AddVersions(r, "ConvInteger", {10}, MakeConvInteger);
  AddVersions(r, "QLinearConv", {10}, MakeQLinearConv);
}

}  // namespace oneinfer
