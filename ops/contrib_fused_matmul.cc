// com.microsoft FusedMatMul (ONNX Runtime's MatMul + Transpose + Mul fusion):
//   Y = alpha * op(A) x op(B), op = swap of the last two axes when transA / transB, batch axes
//   broadcast as in MatMul. float32 on the float GEMM; transBatchA / transBatchB (batch axes moved
//   into the matrix) are refused.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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
  if (a.dtype() != DType::kFloat32 || b.dtype() != DType::kFloat32)
    return InvalidArgument(ctx, "A and B must be float32, got ", DTypeName(a.dtype()), " and ", DTypeName(b.dtype()));
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
  Tensor& y = ctx.AllocateOutputUninitialized(0, DType::kFloat32, out);
  if (y.num_elements() == 0) return absl::OkStatus();
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
    float* c = y.data<float>() + i * M * N;
    if (K == 0) {
      std::fill(c, c + M * N, 0.0f);
      continue;
    }
    Sgemm(ta, tb, M, N, K, alpha, a.data<float>() + ia * M * K, ta ? M : K, b.data<float>() + ib * K * N, tb ? K : N,
          0.0f, c, N, ctx.thread_pool());
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterContribFusedMatMulOps(KernelRegistry& r) { r.AddFn(kMs, "FusedMatMul", 1, 1, FusedMatMul); }

}  // namespace oneinfer
