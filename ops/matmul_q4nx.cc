// MatMulQ4NX (oneinfer.internal): y = A * W for a weight bound from a Q4NX file at load
// (graph/passes/external_weight_binding.cc). Inputs: A float [..., K]; W uint8 [tiles, 5120],
// the weight's q4_1 chunks viewing the mapped file. Attributes K, N. The chunks are repacked
// once into PackedWeightsQ4 (PrepareWeights), a panel at a time, then their file pages dropped.
#include <cstddef>
#include <cstring>
#include <mutex>

#include "ops/kernel.h"
#include "base/mapped_file.h"
#include "graph/internal_ops.h"
#include "base/thread_pool.h"
#include "ops/families.h"
#include "quant/gemm_q4.h"
#include "quant/q4nx.h"

namespace oneinfer {

namespace {

class MatMulQ4NXKernel : public OpKernel {
 public:
  MatMulQ4NXKernel(std::string node, Tensor chunks, int64_t K, int64_t N)
      : node_(std::move(node)), chunks_(std::move(chunks)), K_(K), N_(N) {}

  absl::Status PrepareWeights(ThreadPool* pool) const override {
    std::call_once(prepared_once_, [&] {
      // Panel by panel straight from the chunks: Q4NX's [out, in] rows are Pack's N x K.
      auto packed = PackedWeightsQ4::PackWith(
          K_, N_,
          [&](int64_t n0, int64_t n1, uint8_t* codes, float* d, float* m) {
            q4nx::UnpackRows(chunks_.data<uint8_t>(), K_, n0, n1, codes, d, m);
            return absl::OkStatus();
          },
          pool, ScaleFormat());
      if (!packed.ok()) {
        prepared_ = packed.status();
        return;
      }
      weights_ = std::move(*packed);
      ReleaseMappedPages(chunks_);
    });
    if (!prepared_.ok()) return absl::Status(prepared_.code(), absl::StrCat(node_, ": ", prepared_.message()));
    return absl::OkStatus();
  }

  absl::Status Compute(OpContext& ctx) const override {
    if (!ctx.has_input(0)) return InvalidArgument(ctx, "needs input A");
    const Tensor& a = ctx.input(0);
    if (a.dtype() != DType::kFloat32) return InvalidArgument(ctx, "A must be float32, got ", DTypeName(a.dtype()));
    if (a.rank() < 1 || a.dim(-1) != K_) {
      return InvalidArgument(ctx, "inner dimensions differ: ", ShapeToString(a.shape()), " x [", K_, ", ", N_, "]");
    }
    if (auto st = PrepareWeights(ctx.thread_pool()); !st.ok()) return st;  // a no-op after the load-time call
    Shape out = a.shape();
    out.back() = N_;
    Tensor& y = ctx.AllocateOutputUninitialized(0, DType::kFloat32, out);
    if (y.num_elements() == 0) return absl::OkStatus();
    MatMulQ4(a.num_elements() / K_, a.data<float>(), weights_, y.data<float>(), ctx.thread_pool());
    return absl::OkStatus();
  }

 private:
  // bf16 scales and zeros mostly fit float16 exactly (8 mantissa bits of 11, and the usual
  // exponents): then the packed form keeps them in half the bytes.
  Q4ScaleFormat ScaleFormat() const {
    const uint8_t* p = chunks_.data<uint8_t>();
    for (int64_t t = 0; t < chunks_.dim(0); ++t, p += q4nx::kChunkBytesQ4_1) {
      for (size_t i = 0; i < offsetof(q4nx::ChunkQ4_1, codes); i += 2) {
        uint16_t v;
        std::memcpy(&v, p + i, 2);
        if (!ExactInFloat16(Bf16ToF32(v))) return Q4ScaleFormat::kF32;
      }
    }
    return Q4ScaleFormat::kF16;
  }

  std::string node_;
  Tensor chunks_;
  int64_t K_, N_;
  mutable std::once_flag prepared_once_;
  mutable absl::Status prepared_;
  mutable PackedWeightsQ4 weights_;
};

absl::StatusOr<std::unique_ptr<OpKernel>> MakeMatMulQ4NX(const KernelInit& init) {
  const Node& n = init.node();
  const int64_t K = n.GetInt(internal_ops::MatMulQ4NX::kK, 0), N = n.GetInt(internal_ops::MatMulQ4NX::kN, 0);
  const Tensor* w = init.ConstantInput(1);
  if (w == nullptr || w->dtype() != DType::kUInt8 || w->rank() != 2 || w->dim(1) != static_cast<int64_t>(q4nx::kChunkBytesQ4_1)) {
    return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": W must be a constant uint8 [tiles, 5120] of q4_1 chunks"));
  }
  if (K <= 0 || N <= 0 || K % q4nx::kTileCols != 0 || N % q4nx::kTileRows != 0 ||
      w->dim(0) != (K / q4nx::kTileCols) * (N / q4nx::kTileRows)) {
    return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": K=", K, " N=", N, " do not fit ", w->dim(0), " q4_1 tiles"));
  }
  return std::unique_ptr<OpKernel>(new MatMulQ4NXKernel(n.Describe(), *w, K, N));
}

}  // namespace

void RegisterQ4NXOps(KernelRegistry& r) {
  using internal_ops::kDomain, internal_ops::kOpset;
  r.Add(kDomain, internal_ops::MatMulQ4NX::kName, kOpset, kOpset, MakeMatMulQ4NX);
}

}  // namespace oneinfer
