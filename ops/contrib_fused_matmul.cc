// com.microsoft FusedMatMul (ONNX Runtime's MatMul + Transpose + Mul fusion):
//   Y = alpha * op(A) x op(B), op = swap of the last two axes when transA / transB, batch axes
//   broadcast as in MatMul. float32 on the float GEMM; float16 widened to it in bulk and rounded
//   once (as a float16 MatMul computes); transBatchA / transBatchB (batch axes moved into the
//   matrix) are refused.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "ops/families.h"
#include "ops/gemm/sgemm.h"
#include "ops/kernel.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

constexpr char kMs[] = "com.microsoft";

absl::Status FusedMatMul(OpContext& ctx) {
  const Node& n = ctx.node();
  if (n.GetInt("transBatchA", 0) != 0 || n.GetInt("transBatchB", 0) != 0)
    return InvalidArgument(ctx, "transBatchA / transBatchB are not supported");
  const bool ta = n.GetInt("transA", 0) != 0, tb = n.GetInt("transB", 0) != 0;
  const float alpha = n.GetFloat("alpha", 1.0f);
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const bool half = a.dtype() == DType::kFloat16;
  if ((a.dtype() != DType::kFloat32 && !half) || b.dtype() != a.dtype())
    return InvalidArgument(ctx, "A and B must both be float32 or both float16, got ", DTypeName(a.dtype()), " and ",
                           DTypeName(b.dtype()));
  if (a.rank() < 2 || b.rank() < 2)
    return InvalidArgument(ctx, "A and B must have at least 2 dimensions, got ", ShapeToString(a.shape()), " and ",
                           ShapeToString(b.shape()));
  const int64_t M = ta ? a.dim(-1) : a.dim(-2), K = ta ? a.dim(-2) : a.dim(-1);
  const int64_t Kb = tb ? b.dim(-1) : b.dim(-2), N = tb ? b.dim(-2) : b.dim(-1);
  if (K != Kb)
    return InvalidArgument(ctx, "inner dimensions differ: ", ShapeToString(a.shape()), (ta ? "^T" : ""), " x ",
                           ShapeToString(b.shape()), (tb ? "^T" : ""));
  const Shape a_batch(a.shape().begin(), a.shape().end() - 2), b_batch(b.shape().begin(), b.shape().end() - 2);
  auto batch = BroadcastShapes({a_batch, b_batch});
  if (!batch.ok()) return InvalidArgument(ctx, "batch dimensions do not broadcast: ", batch.status().message());
  Shape out = *batch;
  out.push_back(M);
  out.push_back(N);
  Tensor& y = ctx.AllocateOutputUninitialized(0, a.dtype(), out);
  if (y.num_elements() == 0) return absl::OkStatus();
  // float16: both operands widened (exactly), the float32 products, the result rounded once.
  Tensor a32 = a, b32 = b, y32 = y;
  if (half) {
    a32 = ctx.AllocateTemp(DType::kFloat32, a.shape(), /*zero=*/false);
    b32 = ctx.AllocateTemp(DType::kFloat32, b.shape(), /*zero=*/false);
    y32 = ctx.AllocateTemp(DType::kFloat32, out, /*zero=*/false);
    WidenF16(a.data<uint16_t>(), a32.data<float>(), a.num_elements());
    WidenF16(b.data<uint16_t>(), b32.data<float>(), b.num_elements());
  }
  const int64_t batches = Prod(*batch, 0, batch->size());
  const std::vector<int64_t> sa = BroadcastStrides(a_batch, *batch), sb = BroadcastStrides(b_batch, *batch);
  const std::vector<int64_t> so = Strides(*batch);
  for (int64_t i = 0; i < batches; ++i) {
    int64_t ia = 0, ib = 0, rem = i;
    for (size_t d = 0; d < batch->size(); ++d) {
      const int64_t idx = rem / so[d];
      rem %= so[d];
      ia += idx * sa[d];
      ib += idx * sb[d];
    }
    float* c = y32.data<float>() + i * M * N;
    if (K == 0) {
      std::fill(c, c + M * N, 0.0f);
      continue;
    }
    Sgemm(ta, tb, M, N, K, alpha, a32.data<float>() + ia * M * K, ta ? M : K, b32.data<float>() + ib * K * N,
          tb ? K : N, 0.0f, c, N, ctx.thread_pool());
  }
  if (half) NarrowToF16(y32.data<float>(), y.data<uint16_t>(), y.num_elements());
  return absl::OkStatus();
}

}  // namespace

void RegisterContribFusedMatMulOps(KernelRegistry& r) { r.AddFn(kMs, "FusedMatMul", 1, 1, FusedMatMul); }

}  // namespace oneinfer
