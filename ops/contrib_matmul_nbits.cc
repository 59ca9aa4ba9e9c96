// com.microsoft MatMulNBits (see ops/contrib_matmul_nbits.h for the arithmetic).
//
// 4-bit weights are repacked once (PrepareWeights) into the 4-bit GEMM's layout
// (PackedWeightsQ4: code = q, d = scale, m = -zp * scale, blocks of 32 along K). A block_size of
// 32 or more is a whole number of GEMM blocks; a block_size of 16, or a K that is not a multiple
// of 32, is laid out on an expanded K axis (each 16-block or the ragged tail alone in a 32-block,
// the rest zero codes) and the activations are spread the same way with zeros, so the
// arithmetic stays the GEMM's own, exactly. 8-bit weights are dequantised once into the float
// GEMM's packed panels (no 8-bit block GEMM exists yet). accuracy_level 4 runs the 4-bit GEMM
// with activations quantised to int8 per block of 32 (MatMulQ4, as ONNX Runtime's CompInt8);
// levels 0-3 keep the activations float (MatMulQ4Float), as ONNX Runtime computes them.
#include "ops/contrib_matmul_nbits.h"

#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/half.h"
#include "base/mapped_file.h"
#include "base/thread_pool.h"
#include "ops/families.h"
#include "ops/float_elements.h"
#include "ops/gemm/sgemm.h"
#include "ops/kernel.h"
#include "ops/op_util.h"
#include "quant/gemm_q4.h"

namespace oneinfer {

namespace {

constexpr char kMs[] = "com.microsoft";

bool IsPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

float NBitsWeights::Scale(int64_t n, int64_t blk) const { return FloatAt(scales, n * blocks + blk); }

float NBitsWeights::ZeroPoint(int64_t n, int64_t blk) const {
  if (!zero_points.defined()) return static_cast<float>(1 << (bits - 1));
  if (zero_points.dtype() != DType::kUInt8) return FloatAt(zero_points, n * blocks + blk);
  const int64_t bit = blk * bits;
  const uint8_t byte = zero_points.data<uint8_t>()[n * zp_row + bit / 8];
  return static_cast<float>((byte >> (bit % 8)) & ((1 << bits) - 1));
}

absl::StatusOr<NBitsWeights> CheckNBitsWeights(const std::string& what, int64_t K, int64_t N,
                                               int64_t bits, int64_t block_size, const Tensor& b,
                                               const Tensor& scales, const Tensor* zero_points) {
  auto bad = [&](const auto&... args) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", args...));
  };
  if (bits != 4 && bits != 8) return bad("bits ", bits, " is not supported (4 or 8)");
  if (block_size < 16 || !IsPowerOfTwo(block_size))
    return bad("block_size ", block_size, " must be a power of two >= 16");
  if (K <= 0 || N <= 0) return bad("attributes K and N must be positive (K = ", K, ", N = ", N, ")");
  NBitsWeights w;
  w.K = K;
  w.N = N;
  w.bits = bits;
  w.block_size = block_size;
  w.blocks = (K + block_size - 1) / block_size;
  w.blob = block_size * bits / 8;
  w.zp_row = (w.blocks * bits + 7) / 8;
  const std::string form = absl::StrCat("K = ", K, ", N = ", N, ", bits = ", bits, ", block_size = ", block_size);
  const bool b_shape_ok =
      (b.rank() == 3 && b.dim(0) == N && b.dim(1) == w.blocks && b.dim(2) == w.blob) ||
      (b.rank() == 2 && b.dim(0) == N && b.dim(1) == w.blocks * w.blob);
  if (b.dtype() != DType::kUInt8 || !b_shape_ok)
    return bad("B is ", DTypeName(b.dtype()), " ", ShapeToString(b.shape()), " but ", form,
               " needs uint8 [", N, ", ", w.blocks, ", ", w.blob, "] (", N * w.blocks * w.blob, " bytes)");
  auto one_or_two_d = [&](const Tensor& t, int64_t per_row) {
    return (t.rank() == 1 && t.dim(0) == N * per_row) ||
           (t.rank() == 2 && t.dim(0) == N && t.dim(1) == per_row);
  };
  if (scales.dtype() != DType::kFloat32 && scales.dtype() != DType::kFloat16)
    return bad("scales must be float32 or float16, got ", DTypeName(scales.dtype()));
  if (!one_or_two_d(scales, w.blocks))
    return bad("scales ", ShapeToString(scales.shape()), " do not fit ", form, ": expected [", N * w.blocks,
               "] or [", N, ", ", w.blocks, "]");
  if (zero_points != nullptr) {
    if (zero_points->dtype() == DType::kUInt8) {
      if (!one_or_two_d(*zero_points, w.zp_row))
        return bad("packed zero_points ", ShapeToString(zero_points->shape()), " do not fit ", form,
                   ": expected [", N * w.zp_row, "] or [", N, ", ", w.zp_row, "]");
    } else if (zero_points->dtype() == scales.dtype()) {
      if (!one_or_two_d(*zero_points, w.blocks))
        return bad("zero_points ", ShapeToString(zero_points->shape()), " do not fit ", form, ": expected [",
                   N * w.blocks, "] or [", N, ", ", w.blocks, "]");
    } else {
      return bad("zero_points must be uint8 or the scales' type ", DTypeName(scales.dtype()), ", got ",
                 DTypeName(zero_points->dtype()));
    }
    w.zero_points = *zero_points;
  }
  w.b = b;
  w.scales = scales;
  return w;
}

void MatMulNBitsReference(int64_t M, const float* a, const NBitsWeights& w, const float* bias, float* y) {
  std::vector<float> col(static_cast<size_t>(w.K));
  for (int64_t n = 0; n < w.N; ++n) {
    for (int64_t k = 0; k < w.K; ++k) {
      const int64_t blk = k / w.block_size;
      col[k] = (static_cast<float>(w.Code(n, k)) - w.ZeroPoint(n, blk)) * w.Scale(n, blk);
    }
    for (int64_t r = 0; r < M; ++r) {
      double acc = 0;
      for (int64_t k = 0; k < w.K; ++k) acc += static_cast<double>(a[r * w.K + k]) * col[k];
      y[r * w.N + n] = static_cast<float>(acc + (bias ? bias[n] : 0.0));
    }
  }
}

namespace {

class MatMulNBitsKernel : public OpKernel {
 public:
  MatMulNBitsKernel(std::string name, NBitsWeights w, bool int8_activations)
      : name_(std::move(name)), w_(std::move(w)), int8_activations_(int8_activations) {
    // Positions on the GEMM's K axis: a 16-block is alone in a 32-block; a ragged K is padded.
    expand_ = w_.bits == 4 && (w_.block_size == 16 || w_.K % kQ4Block != 0);
    kp_ = w_.block_size == 16 ? w_.blocks * kQ4Block : (w_.K + kQ4Block - 1) / kQ4Block * kQ4Block;
  }

  // Each row of A is one row of Y; the 4-bit and float GEMMs compute a row the same way whatever M is.
  int RowwiseInput() const override { return 0; }

  absl::Status PrepareWeights(ThreadPool* pool) const override {
    std::call_once(once_, [&] {
      status_ = w_.bits == 4 ? PackQ4(pool) : PackFloat(pool);
      if (!status_.ok()) status_ = absl::InvalidArgumentError(absl::StrCat(name_, ": ", status_.message()));
      ReleaseMappedPages(w_.b);
    });
    return status_;
  }

  absl::Status Compute(OpContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    const int64_t K = w_.K, N = w_.N;
    if (a.dtype() != w_.scales.dtype())
      return InvalidArgument(ctx, "A is ", DTypeName(a.dtype()), " but scales are ", DTypeName(w_.scales.dtype()),
                             " (both are T1)");
    if (a.rank() < 1 || a.dim(-1) != K)
      return InvalidArgument(ctx, "A ", ShapeToString(a.shape()), " does not end in K = ", K);
    const Tensor* bias = ctx.has_input(5) ? &ctx.input(5) : nullptr;
    if (bias != nullptr && (bias->dtype() != a.dtype() || bias->num_elements() != N))
      return InvalidArgument(ctx, "bias must be ", DTypeName(a.dtype()), " [", N, "], got ",
                             DTypeName(bias->dtype()), " ", ShapeToString(bias->shape()));
    if (absl::Status st = PrepareWeights(ctx.thread_pool()); !st.ok()) return st;
    Shape out = a.shape();
    out.back() = N;
    const bool f16 = a.dtype() == DType::kFloat16;
    Tensor& y = ctx.AllocateOutputUninitialized(0, a.dtype(), out);
    const int64_t rows = a.num_elements() / K;
    if (y.num_elements() == 0) return absl::OkStatus();

    // A as float32 rows of the GEMM's K (spread and zero-padded when the layout is expanded).
    const float* a32 = f16 ? nullptr : a.data<float>();
    Tensor a_tmp;
    if (f16 || expand_) {
      const int64_t width = expand_ ? kp_ : K;
      a_tmp = ctx.AllocateTemp(DType::kFloat32, {rows, width}, /*zero=*/expand_);
      float* dst = a_tmp.data<float>();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < K; ++k)
          dst[r * width + GemmPosition(k)] = f16 ? F16ToF32(a.data<uint16_t>()[r * K + k]) : a.data<float>()[r * K + k];
      a32 = dst;
    }
    Tensor y_tmp;
    float* y32 = f16 ? (y_tmp = ctx.AllocateTemp(DType::kFloat32, {rows, N}, false)).data<float>() : y.data<float>();
    if (w_.bits == 4 && int8_activations_)
      MatMulQ4(rows, a32, q4_, y32, ctx.thread_pool());
    else if (w_.bits == 4)
      MatMulQ4Float(rows, a32, q4_, y32, ctx.thread_pool());
    else
      SgemmPacked(rows, N, K, 1.0f, a32, K, f32_, 0.0f, y32, N, ctx.thread_pool());
    if (bias != nullptr)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t n = 0; n < N; ++n) y32[r * N + n] += FloatAt(*bias, n);
    if (f16)
      for (int64_t i = 0; i < rows * N; ++i) y.data<uint16_t>()[i] = F32ToF16(y32[i]);
    return absl::OkStatus();
  }

 private:
  // Where source position k sits on the GEMM's K axis.
  int64_t GemmPosition(int64_t k) const {
    return w_.block_size == 16 && expand_ ? k / 16 * kQ4Block + k % 16 : k;
  }
  // The source block that GEMM block jb (32 positions) belongs to.
  int64_t SourceBlock(int64_t jb) const {
    return w_.block_size == 16 ? jb : jb * kQ4Block / w_.block_size;
  }

  absl::Status PackQ4(ThreadPool* pool) const {
    const int64_t K = w_.K, gemm_blocks = kp_ / kQ4Block;
    // code = q, d = scale, m = -zp * scale; float16 d and m when all are exact there, else d
    // alone when every m is one multiple of d (no zero points: m = -8 d), else both as float32.
    float c = 0.0f;
    const Q4ScaleFormat format = ChooseQ4ScaleFormat(w_.N * w_.blocks, [&](int64_t i) {
      const int64_t n = i / w_.blocks, b = i % w_.blocks;
      const float s = w_.Scale(n, b);
      return std::pair<float, float>(s, -w_.ZeroPoint(n, b) * s);
    }, &c);
    auto fill = [&](int64_t n0, int64_t n1, uint8_t* codes, float* d, float* m) {
      std::memset(codes, 0, static_cast<size_t>((n1 - n0) * kp_));
      for (int64_t n = n0; n < n1; ++n) {
        uint8_t* c = codes + (n - n0) * kp_;
        for (int64_t k = 0; k < K; ++k) c[GemmPosition(k)] = static_cast<uint8_t>(w_.Code(n, k));
        for (int64_t jb = 0; jb < gemm_blocks; ++jb) {
          const int64_t sb = SourceBlock(jb);
          const float s = w_.Scale(n, sb);
          d[(n - n0) * gemm_blocks + jb] = s;
          m[(n - n0) * gemm_blocks + jb] = -w_.ZeroPoint(n, sb) * s;
        }
      }
      return absl::OkStatus();
    };
    auto packed = PackedWeightsQ4::PackWith(kp_, w_.N, fill, pool, format, c);
    if (!packed.ok()) return packed.status();
    q4_ = std::move(*packed);
    return absl::OkStatus();
  }

  absl::Status PackFloat(ThreadPool* pool) const {
    std::vector<float> wt(static_cast<size_t>(w_.N * w_.K));
    for (int64_t n = 0; n < w_.N; ++n)
      for (int64_t k = 0; k < w_.K; ++k) {
        const int64_t blk = k / w_.block_size;
        wt[n * w_.K + k] = (static_cast<float>(w_.Code(n, k)) - w_.ZeroPoint(n, blk)) * w_.Scale(n, blk);
      }
    f32_ = PackedMatrixB::Pack(/*trans_b=*/true, w_.K, w_.N, wt.data(), w_.K, pool);
    return absl::OkStatus();
  }

  std::string name_;
  NBitsWeights w_;
  bool int8_activations_ = false;  // accuracy_level 4: activations quantised to int8 per block
  bool expand_ = false;
  int64_t kp_ = 0;
  mutable std::once_flag once_;
  mutable absl::Status status_;
  mutable PackedWeightsQ4 q4_;
  mutable PackedMatrixB f32_;
};

absl::StatusOr<std::unique_ptr<OpKernel>> MakeMatMulNBits(const KernelInit& init) {
  const Node& n = init.node();
  const std::string what = n.Describe();
  auto bad = [&](const auto&... args) { return absl::InvalidArgumentError(absl::StrCat(what, ": ", args...)); };
  if (!n.HasAttr("K") || !n.HasAttr("N")) return bad("attributes K and N are required");
  const int64_t K = n.GetInt("K", 0), N = n.GetInt("N", 0);
  const int64_t bits = n.GetInt("bits", 4), block_size = n.GetInt("block_size", 0);
  if (!n.HasAttr("block_size")) return bad("attribute block_size is required");
  if (!n.HasInput(0) || !n.HasInput(1) || !n.HasInput(2)) return bad("needs inputs A, B and scales");
  const Tensor* b = init.ConstantInput(1);
  const Tensor* scales = init.ConstantInput(2);
  const Tensor* zp = n.HasInput(3) ? init.ConstantInput(3) : nullptr;
  if (b == nullptr || scales == nullptr || (n.HasInput(3) && zp == nullptr))
    return bad("B, scales and zero_points must be initializers (the weights are repacked at load)");
  auto w = CheckNBitsWeights(what, K, N, bits, block_size, *b, *scales, zp);
  if (!w.ok()) return w.status();
  // ONNX Runtime 1.30 gives a g_idx that restates k / block_size other results than none, so no
  // form of it is taken as the plain layout.
  if (n.HasInput(4))
    return absl::UnimplementedError(
        absl::StrCat(what, ": g_idx (act-order: K rows in another block order) is not supported"));
  if (const TypeInfo* t = init.InputType(0); t != nullptr && t->elem != DType::kUndefined && t->elem != scales->dtype())
    return bad("A is ", DTypeName(t->elem), " but scales are ", DTypeName(scales->dtype()), " (both are T1)");
  // accuracy_level 4 asks for int8 activations (ONNX Runtime's CompInt8); 0-3 compute in float.
  const int64_t level = n.GetInt("accuracy_level", 0);
  if (level < 0 || level > 4) return bad("accuracy_level must be 0 to 4, got ", level);
  return std::unique_ptr<OpKernel>(new MatMulNBitsKernel(what, std::move(*w), level == 4));
}

}  // namespace

void RegisterContribMatMulNBitsOps(KernelRegistry& r) { r.Add(kMs, "MatMulNBits", 1, 1, MakeMatMulNBits); }

}  // namespace oneinfer
