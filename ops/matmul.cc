// MatMul, Gemm, Einsum, Det.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "absl/strings/str_cat.h"
#include "graph/internal_ops.h"
#include "ops/kernel.h"
#include "base/thread_pool.h"
#include "ops/families.h"
#include "base/half.h"
#include "base/mapped_file.h"
#include "ops/gemm/sgemm.h"
#include "ops/matmul.h"
#include "base/gemm_offload.h"
#include "quant/dynamic_a8w8.h"
#include "ops/op_util.h"

namespace oneinfer {


namespace {

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

// dst (rows x cols, dense float32) = src (rows x cols, leading dim ld) widened: float16 rows in
// bulk (F16C), other types element by element.
template <typename T>
void WidenMatrix(const T* src, int64_t ld, int64_t rows, int64_t cols, float* dst) {
  for (int64_t i = 0; i < rows; ++i) {
    if constexpr (std::is_same_v<T, float16>) {
      WidenF16(reinterpret_cast<const uint16_t*>(src + i * ld), dst + i * cols, cols);
    } else {
      for (int64_t k = 0; k < cols; ++k) dst[i * cols + k] = static_cast<float>(src[i * ld + k]);
    }
  }
}

// Generic GEMM for non-float32 types (same contract as GemmF32).
template <typename T>
void GemmT(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
           const T* B, int64_t ldb, T beta, T* C, int64_t ldc, ThreadPool* pool) {
  if constexpr (std::is_same_v<T, float>) {
    Sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool);
  } else if constexpr (kIsHalf<T>) {
    // Widen to float so accumulation happens in float32; one rounding back.
    std::vector<float> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * N)),
        c(static_cast<size_t>(M * N));
    // Widened as stored; Sgemm reads the transposes.
    const int64_t a_cols = ta ? M : K, b_cols = tb ? K : N;
    WidenMatrix(A, lda, ta ? K : M, a_cols, a.data());
    WidenMatrix(B, ldb, tb ? N : K, b_cols, b.data());
    const float fb = static_cast<float>(beta);
    if (fb != 0.f) WidenMatrix(C, ldc, M, N, c.data());
    Sgemm(ta, tb, M, N, K, static_cast<float>(alpha), a.data(), a_cols, b.data(), b_cols, fb, c.data(), N, pool);
    for (int64_t i = 0; i < M; ++i) {
      if constexpr (std::is_same_v<T, float16>) {
        NarrowToF16(c.data() + i * N, reinterpret_cast<uint16_t*>(C + i * ldc), N);
      } else {
        for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = static_cast<T>(c[i * N + j]);
      }
    }
  } else {
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using CMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
    Eigen::Map<Mat, 0, Eigen::OuterStride<>> c(C, M, N, Eigen::OuterStride<>(ldc));
    Mat a = ta ? Mat(CMap(A, K, M, Eigen::OuterStride<>(lda)).transpose())
               : Mat(CMap(A, M, K, Eigen::OuterStride<>(lda)));
    Mat b = tb ? Mat(CMap(B, N, K, Eigen::OuterStride<>(ldb)).transpose())
               : Mat(CMap(B, K, N, Eigen::OuterStride<>(ldb)));
    if (beta == T(0)) c.setZero(); else c *= beta;
    if (K > 0) c.noalias() += alpha * (a * b);
  }
}

bool IsGemmType(DType d) {
  return d != DType::kBool && d != DType::kString && d != DType::kUndefined && d != DType::kUInt4 &&
         d != DType::kInt4;
}

// ---------------------------------------------------------------- MatMul

// Y = A x B over the broadcast batch `ob` of A's and B's leading dimensions (abatch, bbatch).
template <typename T>
void BatchedMatMul(const T* pa, const T* pb, T* py, const Shape& abatch, const Shape& bbatch, const Shape& ob,
                   int64_t M, int64_t N, int64_t K, ThreadPool* pool) {
  const int64_t batches = NumElements(ob);
  if (NumElements(bbatch) == 1 && NumElements(abatch) == batches) {
    // B is a single matrix: fold A's batch into M (the [1,S,K] x [K,N] case).
    GemmT<T>(false, false, batches * M, N, K, T(1), pa, K, pb, N, T(0), py, N, pool);
    return;
  }
  const auto sa = BroadcastStrides(abatch, ob), sb = BroadcastStrides(bbatch, ob);
  const auto so = Strides(ob);
  for (int64_t i = 0; i < batches; ++i) {
    int64_t oa = 0, obb = 0, r = i;
    for (size_t d = 0; d < so.size(); ++d) {
      const int64_t idx = r / so[d];
      r %= so[d];
      oa += idx * sa[d];
      obb += idx * sb[d];
    }
    GemmT<T>(false, false, M, N, K, T(1), pa + oa * M * K, K, pb + obb * K * N, N, T(0), py + i * M * N, N, pool);
  }
}

absl::Status MatMulCompute(OpContext& ctx) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "MatMul needs inputs A and B");
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) return InvalidArgument(ctx, "A and B have different element types");
  if (!IsGemmType(a.dtype())) return InvalidArgument(ctx, "unsupported element type ", DTypeName(a.dtype()));
  if (a.rank() < 1 || b.rank() < 1) return InvalidArgument(ctx, "MatMul inputs must have rank >= 1");
  Shape as = a.shape(), bs = b.shape();
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K)
    return InvalidArgument(ctx, "inner dimensions differ: ", ShapeToString(a.shape()), " x ",
                           ShapeToString(b.shape()));
  const Shape abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  auto ob = BroadcastShapes({abatch, bbatch});
  if (!ob.ok()) return InvalidArgument(ctx, ob.status().message());
  Shape out = *ob;
  if (!a_vec) out.push_back(M);
  if (!b_vec) out.push_back(N);
  if (a.dtype() == DType::kFloat16) {
    // As ONNX Runtime's CPU provider computes it: both widened to float32 (in bulk: attention's
    // float16 products read the whole cache each step), one float32 product, rounded once.
    Tensor& y = ctx.AllocateOutputUninitialized(0, a.dtype(), out);
    if (y.num_elements() == 0) return absl::OkStatus();
    Tensor a32 = ctx.AllocateTemp(DType::kFloat32, a.shape(), /*zero=*/false);
    Tensor b32 = ctx.AllocateTemp(DType::kFloat32, b.shape(), /*zero=*/false);
    Tensor y32 = ctx.AllocateTemp(DType::kFloat32, out, /*zero=*/false);
    WidenF16(a.data<uint16_t>(), a32.data<float>(), a.num_elements());
    WidenF16(b.data<uint16_t>(), b32.data<float>(), b.num_elements());
    if (K == 0) std::fill_n(y32.data<float>(), y32.num_elements(), 0.0f);
    else BatchedMatMul<float>(a32.data<float>(), b32.data<float>(), y32.data<float>(), abatch, bbatch, *ob, M, N, K, ctx.thread_pool());
    NarrowToF16(y32.data<float>(), y.data<uint16_t>(), y.num_elements());
    return absl::OkStatus();
  }
  Tensor& y = ctx.AllocateOutput(0, a.dtype(), out);
  if (y.num_elements() == 0) return absl::OkStatus();
  return VisitNumeric(a.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      BatchedMatMul<T>(a.data<T>(), b.data<T>(), y.data<T>(), abatch, bbatch, *ob, M, N, K, ctx.thread_pool());
    }
    return absl::OkStatus();
  });
}

// MatMul whose B is a constant float32 or float16 [K, N] matrix. The weight is prepared into a
// kernel's own layout once, by PrepareWeights when the session loads (or on the first run when
// SessionOptions::prepare_weights is off), after which its mapped file pages are dropped: the
// prepared copy replaces them. `Weights` is the prepared form; `multiply(rows, a, weights, y,
// pool)` computes y = a * B in float32. A float16 model's A is widened to float32 and the result
// rounded once to float16, as ONNX Runtime's CPU provider computes a float16 MatMul.
template <typename Weights>
class ConstantWeightMatMulKernel : public OpKernel {
 public:
  // A std::function: the A8W8 preparation carries the session's offload.
  using Prepare = std::function<Weights(const Tensor& b, ThreadPool* pool)>;
  using Multiply = void (*)(int64_t rows, const float* a, const Weights& w, float* y, ThreadPool* pool);
  ConstantWeightMatMulKernel(Tensor b, Prepare prepare, Multiply multiply)
      : b_(std::move(b)), prepare_(std::move(prepare)), multiply_(multiply) {}

  absl::Status PrepareWeights(ThreadPool* pool) const override {
    std::call_once(prepared_once_, [&] {
      weights_ = prepare_(b_, pool);
      ReleaseMappedPages(b_);
    });
    return absl::OkStatus();
  }

  // Each row of A is one row of Y, and the GEMMs compute a row the same way whatever M is.
  int RowwiseInput() const override { return 0; }

  absl::Status Compute(OpContext& ctx) const override {
    if (!ctx.has_input(0)) return InvalidArgument(ctx, "MatMul needs inputs A and B");
    const Tensor& a = ctx.input(0);
    const int64_t K = b_.dim(0), N = b_.dim(1);
    if (a.dtype() != b_.dtype()) return InvalidArgument(ctx, "A and B have different element types");
    if (a.rank() < 1 || a.dim(-1) != K) {
      return InvalidArgument(ctx, "inner dimensions differ: ", ShapeToString(a.shape()), " x [", K, ", ", N, "]");
    }
    PrepareWeights(ctx.thread_pool()).IgnoreError();  // a no-op after the session's load-time call
    Shape out = a.shape();
    out.back() = N;
    Tensor& y = ctx.AllocateOutputUninitialized(0, a.dtype(), out);
    if (y.num_elements() == 0) return absl::OkStatus();
    const int64_t rows = a.num_elements() / K;
    if (a.dtype() == DType::kFloat32) {
      multiply_(rows, a.data<float>(), weights_, y.data<float>(), ctx.thread_pool());
      return absl::OkStatus();
    }
    Tensor a32 = ctx.AllocateTemp(DType::kFloat32, a.shape(), /*zero=*/false);
    Tensor y32 = ctx.AllocateTemp(DType::kFloat32, out, /*zero=*/false);
    WidenF16(a.data<uint16_t>(), a32.data<float>(), a.num_elements());
    multiply_(rows, a32.data<float>(), weights_, y32.data<float>(), ctx.thread_pool());
    NarrowToF16(y32.data<float>(), y.data<uint16_t>(), y.num_elements());
    return absl::OkStatus();
  }

 private:
  Tensor b_;
  Prepare prepare_;
  Multiply multiply_;
  mutable std::once_flag prepared_once_;
  mutable Weights weights_;
};

// B (float32 or float16) as float32 values: the tensor's own when float32, else widened.
std::vector<float> WidenedWeights(const Tensor& b) {
  std::vector<float> w(static_cast<size_t>(b.num_elements()));
  for (size_t i = 0; i < w.size(); ++i) w[i] = F16ToF32(b.data<uint16_t>()[i]);
  return w;
}

// Float: B packed into the GEMM's panel layout (float16 panels for a float16 B, widened block by
// block inside the GEMM), every run streams the packed panels.
PackedMatrixB PreparePackedFloat(const Tensor& w, ThreadPool* pool) {
  const int64_t K = w.dim(0), N = w.dim(1);
  return w.dtype() == DType::kFloat16 ? PackedMatrixB::PackHalf(false, K, N, w.data<uint16_t>(), N, pool)
                                       : PackedMatrixB::Pack(false, K, N, w.data<float>(), N, pool);
}

void MultiplyPackedFloat(int64_t rows, const float* a, const PackedMatrixB& w, float* y, ThreadPool* pool) {
  SgemmPacked(rows, w.N(), w.K(), 1.f, a, w.K(), w, 0.f, y, w.N(), pool);
}

std::unique_ptr<OpKernel> MakePackedFloatMatMul(const Tensor& b) {
  return std::make_unique<ConstantWeightMatMulKernel<PackedMatrixB>>(b, PreparePackedFloat, MultiplyPackedFloat);
}

// Dynamic A8W8: B quantised per column once, activations per row each run, int8 x int8 -> int32
// through the session's offload (KernelConfig::int8_offload) when it has one, which decides what
// leaves the host; else the packed host GEMM.
A8W8Weights PrepareA8W8(const Tensor& w, Int8GemmOffload* offload) {
  if (w.dtype() == DType::kFloat32) return A8W8Weights::FromFloat(w.data<float>(), w.dim(0), w.dim(1), offload);
  const std::vector<float> wide = WidenedWeights(w);
  return A8W8Weights::FromFloat(wide.data(), w.dim(0), w.dim(1), offload);
}

std::unique_ptr<OpKernel> MakeA8W8MatMul(const Tensor& b, Int8GemmOffload* offload) {
  return std::make_unique<ConstantWeightMatMulKernel<A8W8Weights>>(
      b, [offload](const Tensor& w, ThreadPool*) { return PrepareA8W8(w, offload); },
      [](int64_t rows, const float* a, const A8W8Weights& w, float* y, ThreadPool* pool) {
        MatMulA8W8(rows, a, w, y, pool);
      });
}

// MatMulGroup(A, W_1, ..., W_n) -> Y_1, ..., Y_n (graph/passes/matmul_group_fusion.cc): MatMuls
// that read one A, each constant W_i [K, N_i] bound as its MatMul alone binds it (BindMatMul).
// The int8 ones quantise A once and share one parallel run (MatMulA8W8Group: 3 of a layer's 7
// quantisations and pool hand-offs fewer); the float ones run SgemmPacked each. Y_i has the bits
// of its MatMul alone, and a row of A the same ones whatever the rows around it.
class MatMulGroupKernel : public OpKernel {
 public:
  MatMulGroupKernel(std::vector<Tensor> b, MatMulPrecision precision, Int8GemmOffload* offload)
      : b_(std::move(b)), offload_(offload), int8_(b_.size()), packed_(b_.size()) {
    for (const Tensor& w : b_) binding_.push_back(BindMatMul(&w, precision));
  }

  absl::Status PrepareWeights(ThreadPool* pool) const override {
    std::call_once(prepared_once_, [&] {
      for (size_t i = 0; i < b_.size(); ++i) {
        if (binding_[i] == MatMulBinding::kInt8A8W8) int8_[i] = PrepareA8W8(b_[i], offload_);
        else packed_[i] = PreparePackedFloat(b_[i], pool);
        ReleaseMappedPages(b_[i]);
      }
    });
    return absl::OkStatus();
  }

  int RowwiseInput() const override { return 0; }

  absl::Status Compute(OpContext& ctx) const override {
    if (!ctx.has_input(0)) return InvalidArgument(ctx, "MatMulGroup needs A");
    const Tensor& a = ctx.input(0);
    const int64_t K = b_[0].dim(0);
    if (a.dtype() != b_[0].dtype()) return InvalidArgument(ctx, "A and the weights have different element types");
    if (a.rank() < 1 || a.dim(-1) != K) {
      return InvalidArgument(ctx, "inner dimensions differ: ", ShapeToString(a.shape()), " x [", K, ", N]");
    }
    PrepareWeights(ctx.thread_pool()).IgnoreError();  // a no-op after the session's load-time call
    const int64_t rows = a.num_elements() / K;
    const bool half = a.dtype() == DType::kFloat16;
    std::vector<Tensor*> y;
    for (size_t i = 0; i < b_.size(); ++i) {
      Shape out = a.shape();
      out.back() = b_[i].dim(1);
      y.push_back(&ctx.AllocateOutputUninitialized(i, a.dtype(), out));
    }
    if (rows == 0) return absl::OkStatus();
    // float32 operands: A's own or widened once, the results in place or rounded once each.
    Tensor a32 = half ? ctx.AllocateTemp(DType::kFloat32, a.shape(), /*zero=*/false) : a;
    if (half) WidenF16(a.data<uint16_t>(), a32.data<float>(), a.num_elements());
    std::vector<Tensor> y32(b_.size());
    std::vector<const A8W8Weights*> int8;
    std::vector<float*> int8_y;
    for (size_t i = 0; i < b_.size(); ++i) {
      y32[i] = half ? ctx.AllocateTemp(DType::kFloat32, y[i]->shape(), /*zero=*/false) : *y[i];
      if (binding_[i] == MatMulBinding::kInt8A8W8) {
        int8.push_back(&int8_[i]);
        int8_y.push_back(y32[i].data<float>());
      } else {
        MultiplyPackedFloat(rows, a32.data<float>(), packed_[i], y32[i].data<float>(), ctx.thread_pool());
      }
    }
    if (!int8.empty()) MatMulA8W8Group(rows, a32.data<float>(), int8, int8_y, ctx.thread_pool());
    if (half) {
      for (size_t i = 0; i < b_.size(); ++i) NarrowToF16(y32[i].data<float>(), y[i]->data<uint16_t>(), y[i]->num_elements());
    }
    return absl::OkStatus();
  }

 private:
  std::vector<Tensor> b_;
  Int8GemmOffload* offload_;
  std::vector<MatMulBinding> binding_;
  mutable std::once_flag prepared_once_;
  mutable std::vector<A8W8Weights> int8_;
  mutable std::vector<PackedMatrixB> packed_;
};

}  // namespace

MatMulBinding BindMatMul(const Tensor* b, MatMulPrecision precision) {
  if (b == nullptr || (b->dtype() != DType::kFloat32 && b->dtype() != DType::kFloat16) || b->rank() != 2 ||
      b->dim(0) <= 0 || b->dim(1) <= 0) {
    return MatMulBinding::kGeneric;
  }
  if (precision == MatMulPrecision::kInt8 && b->dim(0) <= PackedWeightsS8::kMaxK) return MatMulBinding::kInt8A8W8;
  return MatMulBinding::kFloatPacked;
}

namespace {

absl::StatusOr<std::unique_ptr<OpKernel>> MatMulFactory(const KernelInit& init) {
  const Tensor* b = init.ConstantInput(1);
  switch (BindMatMul(b, init.config().matmul)) {
    case MatMulBinding::kInt8A8W8: return MakeA8W8MatMul(*b, init.config().int8_offload);
    case MatMulBinding::kFloatPacked: return MakePackedFloatMatMul(*b);
    case MatMulBinding::kGeneric: break;
  }
  return MakeFnKernel(MatMulCompute)(init);
}

// The weights must be what the fusion guarantees: constant float32 or float16 matrices of one K
// and one type, each binding to a packed kernel; anything else is a load error.
absl::StatusOr<std::unique_ptr<OpKernel>> MatMulGroupFactory(const KernelInit& init) {
  const Node& n = init.node();
  if (n.inputs.size() < 2 || n.outputs.size() != n.inputs.size() - 1) {
    return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": MatMulGroup needs A, one weight per output"));
  }
  std::vector<Tensor> b;
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    const Tensor* w = init.ConstantInput(i);
    if (w == nullptr || BindMatMul(w, init.config().matmul) == MatMulBinding::kGeneric ||
        (!b.empty() && (w->dim(0) != b[0].dim(0) || w->dtype() != b[0].dtype()))) {
      return absl::InvalidArgumentError(absl::StrCat(
          n.Describe(), ": MatMulGroup weight ", i, " is not a constant float matrix of the first one's K and type"));
    }
    b.push_back(*w);
  }
  return std::make_unique<MatMulGroupKernel>(std::move(b), init.config().matmul, init.config().int8_offload);
}

// ---------------------------------------------------------------- Gemm

absl::Status GemmCompute(OpContext& ctx) {
  const Node& n = ctx.node();
  if (!ctx.has_input(0) || !ctx.has_input(1)) return InvalidArgument(ctx, "Gemm needs inputs A and B");
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const bool ta = n.GetInt("transA", 0) != 0, tb = n.GetInt("transB", 0) != 0;
  const float alpha = n.GetFloat("alpha", 1.f);
  float beta = n.GetFloat("beta", 1.f);
  if (a.rank() != 2 || b.rank() != 2) return InvalidArgument(ctx, "Gemm inputs A and B must be 2-D");
  if (a.dtype() != b.dtype()) return InvalidArgument(ctx, "A and B have different element types");
  if (!IsGemmType(a.dtype())) return InvalidArgument(ctx, "unsupported element type ", DTypeName(a.dtype()));
  const int64_t M = ta ? a.dim(1) : a.dim(0), K = ta ? a.dim(0) : a.dim(1);
  const int64_t N = tb ? b.dim(0) : b.dim(1), Kb = tb ? b.dim(1) : b.dim(0);
  if (K != Kb) return InvalidArgument(ctx, "inner dimensions differ: ", ShapeToString(a.shape()), " x ",
                                      ShapeToString(b.shape()));
  Tensor& y = ctx.AllocateOutput(0, a.dtype(), {M, N});
  const bool has_c = ctx.has_input(2) && beta != 0.f;
  if (ctx.has_input(2)) {
    const Tensor& c = ctx.input(2);
    if (c.dtype() != a.dtype()) return InvalidArgument(ctx, "C has a different element type");
    if (c.rank() > 2) return InvalidArgument(ctx, "C must have rank <= 2");
    auto bs = BroadcastShapes({c.shape(), {M, N}});
    if (!bs.ok() || *bs != Shape{M, N})
      return InvalidArgument(ctx, "C of shape ", ShapeToString(c.shape()), " does not broadcast to ",
                             ShapeToString({M, N}));
  }
  if (!has_c) beta = 0.f;
  if (M * N == 0) return absl::OkStatus();
  return VisitNumeric(a.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      return absl::OkStatus();
    } else {
      T* py = y.data<T>();
      if (has_c) {
        const Tensor& c = ctx.input(2);
        const auto st = BroadcastStrides(c.shape(), {M, N});
        const T* pc = c.data<T>();
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) py[i * N + j] = pc[i * st[0] + j * st[1]];
      }
      GemmT<T>(ta, tb, M, N, K, static_cast<T>(alpha), a.data<T>(), a.dim(1), b.data<T>(), b.dim(1),
               static_cast<T>(beta), py, N, ctx.thread_pool());
      return absl::OkStatus();
    }
  });
}

// ---------------------------------------------------------------- Einsum

// Parsed equation: one label list per input and for the output. Labels are chars; the
// ellipsis dims become labels 0..E-1 (below any letter).
struct EinsumSpec {
  std::vector<std::string> inputs;  // raw terms
  std::string output;
  bool explicit_output = false;
};

absl::StatusOr<EinsumSpec> ParseEinsum(std::string eq) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  EinsumSpec s;
  std::string lhs = eq;
  const size_t arrow = eq.find("->");
  if (arrow != std::string::npos) {
    lhs = eq.substr(0, arrow);
    s.output = eq.substr(arrow + 2);
    s.explicit_output = true;
  }
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    s.inputs.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  auto valid = [](const std::string& t) {
    for (size_t i = 0; i < t.size(); ++i) {
      const char c = t[i];
      if (std::isalpha(static_cast<unsigned char>(c))) continue;
      if (c == '.' && t.compare(i, 3, "...") == 0) { i += 2; continue; }
      return false;
    }
    return std::count(t.begin(), t.end(), '.') <= 3;
  };
  for (const auto& t : s.inputs)
    if (!valid(t)) return absl::InvalidArgumentError(absl::StrCat("bad Einsum term '", t, "'"));
  if (!valid(s.output)) return absl::InvalidArgumentError(absl::StrCat("bad Einsum output '", s.output, "'"));
  return s;
}

// Expands a term into per-dimension labels (ints); ellipsis dims get labels 0..E-1
// right-aligned against the widest ellipsis.
absl::StatusOr<std::vector<int>> ExpandTerm(const std::string& term, int64_t rank, int64_t ell_rank_max,
                                            int64_t* ell_rank) {
  std::vector<int> labels;
  const size_t dots = term.find("...");
  const int64_t letters = static_cast<int64_t>(term.size()) - (dots == std::string::npos ? 0 : 3);
  if (dots == std::string::npos) {
    if (letters != rank)
      return absl::InvalidArgumentError(absl::StrCat("Einsum term '", term, "' does not match rank ", rank));
    *ell_rank = 0;
  } else {
    if (letters > rank)
      return absl::InvalidArgumentError(absl::StrCat("Einsum term '", term, "' does not match rank ", rank));
    *ell_rank = rank - letters;
  }
  for (size_t i = 0; i < term.size(); ++i) {
    if (term[i] == '.') {
      for (int64_t e = 0; e < *ell_rank; ++e) labels.push_back(static_cast<int>(ell_rank_max - *ell_rank + e));
      i += 2;
    } else {
      labels.push_back(static_cast<int>(static_cast<unsigned char>(term[i])) + 64);
    }
  }
  return labels;
}

absl::Status EinsumCompute(OpContext& ctx, const EinsumSpec& spec) {
  const size_t n_in = spec.inputs.size();
  if (ctx.num_inputs() != n_in) return InvalidArgument(ctx, "Einsum equation names ", n_in, " inputs, node has ", ctx.num_inputs());
  DType dt = DType::kUndefined;
  int64_t ell_max = 0;
  for (size_t i = 0; i < n_in; ++i) {
    if (!ctx.has_input(i)) return InvalidArgument(ctx, "missing input ", i);
    const Tensor& t = ctx.input(i);
    if (i == 0) dt = t.dtype();
    if (t.dtype() != dt) return InvalidArgument(ctx, "inputs have different element types");
    const size_t dots = spec.inputs[i].find("...");
    if (dots != std::string::npos) ell_max = std::max<int64_t>(ell_max, t.rank() - (static_cast<int64_t>(spec.inputs[i].size()) - 3));
  }
  if (!IsGemmType(dt)) return InvalidArgument(ctx, "unsupported element type ", DTypeName(dt));
  std::vector<std::vector<int>> labels(n_in);
  std::map<int, int64_t> size;  // label -> extent
  std::map<int, int> count;
  for (size_t i = 0; i < n_in; ++i) {
    const Tensor& t = ctx.input(i);
    int64_t er = 0;
    auto l = ExpandTerm(spec.inputs[i], t.rank(), ell_max, &er);
    if (!l.ok()) return InvalidArgument(ctx, l.status().message());
    labels[i] = *l;
    for (size_t d = 0; d < labels[i].size(); ++d) {
      const int lab = labels[i][d];
      const int64_t ext = t.dim(static_cast<int64_t>(d));
      auto it = size.find(lab);
      if (it == size.end()) {
        size[lab] = ext;
      } else if (it->second != ext) {
        // Ellipsis dims broadcast; letter dims must agree.
        if (lab < 64 && (it->second == 1 || ext == 1)) it->second = std::max(it->second, ext);
        else return InvalidArgument(ctx, "Einsum dimension mismatch for a label: ", it->second, " vs ", ext);
      }
    }
    std::vector<int> uniq = labels[i];
    std::sort(uniq.begin(), uniq.end());
    uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
    for (int lab : uniq) count[lab] += 1;
    // A label repeated inside one term counts as appearing more than once.
    for (int lab : uniq)
      if (std::count(labels[i].begin(), labels[i].end(), lab) > 1) count[lab] += 1;
  }
  std::vector<int> out_labels;
  if (spec.explicit_output) {
    int64_t er = 0;
    const bool dots = spec.output.find("...") != std::string::npos;
    const int64_t rank = static_cast<int64_t>(spec.output.size()) - (dots ? 3 : 0) + (dots ? ell_max : 0);
    auto l = ExpandTerm(spec.output, rank, ell_max, &er);
    if (!l.ok()) return InvalidArgument(ctx, l.status().message());
    out_labels = *l;
    std::vector<int> sorted = out_labels;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return InvalidArgument(ctx, "Einsum output repeats a label");
    for (int lab : out_labels)
      if (!size.count(lab)) return InvalidArgument(ctx, "Einsum output label not in any input");
  } else {
    for (int64_t e = 0; e < ell_max; ++e) out_labels.push_back(static_cast<int>(e));
    for (const auto& [lab, c] : count)
      if (lab >= 64 && c == 1) out_labels.push_back(lab);
  }
  // All labels: output first, then the summed ones.
  std::vector<int> all = out_labels;
  for (const auto& [lab, ext] : size)
    if (std::find(all.begin(), all.end(), lab) == all.end()) all.push_back(lab);
  const size_t n_out = out_labels.size(), n_all = all.size();
  Shape out_shape;
  for (int lab : out_labels) out_shape.push_back(size[lab]);
  std::vector<int64_t> ext(n_all);
  for (size_t k = 0; k < n_all; ++k) ext[k] = size[all[k]];
  // stride[i][k]: step of input i along label k (summed over repeats = diagonal).
  std::vector<std::vector<int64_t>> stride(n_in, std::vector<int64_t>(n_all, 0));
  for (size_t i = 0; i < n_in; ++i) {
    const auto st = Strides(ctx.input(i).shape());
    for (size_t d = 0; d < labels[i].size(); ++d) {
      if (ctx.input(i).dim(static_cast<int64_t>(d)) == 1) continue;  // broadcast ellipsis dim
      const size_t k = std::find(all.begin(), all.end(), labels[i][d]) - all.begin();
      stride[i][k] += st[d];
    }
  }
  Tensor& y = ctx.AllocateOutput(0, dt, out_shape);
  int64_t inner = 1;
  for (size_t k = n_out; k < n_all; ++k) inner *= ext[k];
  return VisitNumeric(dt, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      return absl::OkStatus();
    } else {
      using Acc = std::conditional_t<kIsHalf<T>, float, T>;
      std::vector<const T*> src(n_in);
      for (size_t i = 0; i < n_in; ++i) src[i] = ctx.input(i).data<T>();
      T* py = y.data<T>();
      const int64_t outer = y.num_elements();
      ParallelFor(ctx.thread_pool(), outer, std::max<int64_t>(1, 4096 / std::max<int64_t>(inner, 1)),
                  [&](int64_t b, int64_t e) {
        std::vector<int64_t> idx(n_all), off(n_in);
        for (int64_t o = b; o < e; ++o) {
          int64_t r = o;
          std::fill(off.begin(), off.end(), 0);
          for (int64_t k = static_cast<int64_t>(n_out) - 1; k >= 0; --k) {
            const int64_t v = r % ext[k];
            r /= ext[k];
            for (size_t i = 0; i < n_in; ++i) off[i] += v * stride[i][k];
          }
          std::fill(idx.begin() + n_out, idx.end(), 0);
          Acc acc = Acc(0);
          for (int64_t s = 0; s < inner; ++s) {
            Acc p = Acc(1);
            for (size_t i = 0; i < n_in; ++i) {
              int64_t q = off[i];
              for (size_t k = n_out; k < n_all; ++k) q += idx[k] * stride[i][k];
              p = p * static_cast<Acc>(src[i][q]);
            }
            acc += p;
            for (int64_t k = static_cast<int64_t>(n_all) - 1; k >= static_cast<int64_t>(n_out); --k) {
              if (++idx[k] < ext[k]) break;
              idx[k] = 0;
            }
          }
          py[o] = static_cast<T>(acc);
        }
      });
      return absl::OkStatus();
    }
  });
}

class EinsumKernel : public OpKernel {
 public:
  explicit EinsumKernel(EinsumSpec s) : spec_(std::move(s)) {}
  absl::Status Compute(OpContext& ctx) const override { return EinsumCompute(ctx, spec_); }

 private:
  EinsumSpec spec_;
};

absl::StatusOr<std::unique_ptr<OpKernel>> MakeEinsum(const KernelInit& init) {
  const Node& n = init.node();
  if (!n.HasAttr("equation")) return Unimplemented(n, "Einsum needs an 'equation' attribute");
  auto s = ParseEinsum(n.GetString("equation", ""));
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": ", s.status().message()));
  return std::unique_ptr<OpKernel>(new EinsumKernel(std::move(*s)));
}

// ---------------------------------------------------------------- Det

absl::Status DetCompute(OpContext& ctx) {
  if (!ctx.has_input(0)) return InvalidArgument(ctx, "Det needs input X");
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2 || x.dim(-1) != x.dim(-2)) return InvalidArgument(ctx, "Det input must be [*, M, M], got ", ShapeToString(x.shape()));
  if (!IsFloatingPoint(x.dtype())) return InvalidArgument(ctx, "Det needs a floating-point input");
  const int64_t n = x.dim(-1);
  Shape os(x.shape().begin(), x.shape().end() - 2);
  Tensor& y = ctx.AllocateOutput(0, x.dtype(), os);
  const int64_t batches = NumElements(os);
  return VisitNumeric(x.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T>) {
      return absl::OkStatus();
    } else {
      std::vector<double> m(static_cast<size_t>(n * n));
      for (int64_t bi = 0; bi < batches; ++bi) {
        const T* p = x.data<T>() + bi * n * n;
        for (int64_t i = 0; i < n * n; ++i) m[i] = static_cast<double>(p[i]);
        double det = 1;
        // LU with partial pivoting.
        for (int64_t c = 0; c < n && det != 0; ++c) {
          int64_t piv = c;
          for (int64_t r = c + 1; r < n; ++r)
            if (std::abs(m[r * n + c]) > std::abs(m[piv * n + c])) piv = r;
          if (m[piv * n + c] == 0) { det = 0; break; }
          if (piv != c) {
            for (int64_t k = 0; k < n; ++k) std::swap(m[c * n + k], m[piv * n + k]);
            det = -det;
          }
          det *= m[c * n + c];
          for (int64_t r = c + 1; r < n; ++r) {
            const double f = m[r * n + c] / m[c * n + c];
            for (int64_t k = c; k < n; ++k) m[r * n + k] -= f * m[c * n + k];
          }
        }
        y.data<T>()[bi] = static_cast<T>(det);
      }
      return absl::OkStatus();
    }
  });
}

}  // namespace

void RegisterMatMulOps(KernelRegistry& r) {
  r.Add("", "MatMul", 1, 8, MatMulFactory);
  r.Add("", "MatMul", 9, 12, MatMulFactory);
  r.Add("", "MatMul", 13, kNewestOpset, MatMulFactory);
  r.Add(internal_ops::kDomain, internal_ops::MatMulGroup::kName, internal_ops::kOpset, internal_ops::kOpset,
        MatMulGroupFactory);
  r.AddFn("", "Gemm", 1, 5, GemmCompute);
  r.AddFn("", "Gemm", 6, 6, GemmCompute);
  r.AddFn("", "Gemm", 7, 8, GemmCompute);
  r.AddFn("", "Gemm", 9, 10, GemmCompute);
  r.AddFn("", "Gemm", 11, 12, GemmCompute);
  r.AddFn("", "Gemm", 13, kNewestOpset, GemmCompute);
  r.Add("", "Einsum", 12, kNewestOpset, MakeEinsum);
  r.AddFn("", "Det", 11, 21, DetCompute);
  r.AddFn("", "Det", 22, kNewestOpset, DetCompute);  // 22 added bfloat16 only
}

}  // namespace oneinfer
