// WeightDequantMatMul (oneinfer.internal, made by FuseWeightDequantMatMul):
//   y = A (float) x DequantizeLinear(W, scale, zero_point)
// with W an int4/uint4 [K, N] weight blocked along K, bound to the 4-bit GEMM, or an int8/uint8
// weight per column or per tensor, bound to the int8 GEMM with activations quantised per row.
// The integer weight is packed once (PrepareWeights) and the float weight never exists.
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ops/kernel.h"
#include "base/thread_pool.h"
#include "base/mapped_file.h"
#include "graph/internal_ops.h"
#include "ops/families.h"
#include "ops/op_util.h"
#include "quant/dynamic_a8w8.h"
#include "quant/gemm_q4.h"

namespace oneinfer {

namespace {

// Element i of a packed 4-bit tensor (low nibble first), sign-extended for int4.
inline int32_t Nibble(const uint8_t* p, int64_t i, bool is_signed) {
  const int32_t v = (p[i >> 1] >> ((i & 1) * 4)) & 0x0f;
  return is_signed && v >= 8 ? v - 16 : v;
}

class WeightDequantMatMulKernel : public OpKernel {
 public:
  WeightDequantMatMulKernel(std::string name, Tensor w, Tensor s, Tensor zp, int64_t block_size)
      : name_(std::move(name)), w_(std::move(w)), s_(std::move(s)), zp_(std::move(zp)),
        block_size_(block_size) {}

  // Each row of A is one row of Y; the 4-bit and int8 GEMMs compute a row the same way whatever M is.
  int RowwiseInput() const override { return 0; }

  absl::Status PrepareWeights(ThreadPool* pool) const override {
    std::call_once(once_, [&] {
      status_ = q4() ? PackQ4(pool) : PackS8();
      // The packed copy replaces the integer weight and its scales: their mapped file pages may go.
      ReleaseMappedPages(w_);
      ReleaseMappedPages(s_);
      if (zp_.defined()) ReleaseMappedPages(zp_);
    });
    return status_;
  }

  absl::Status Compute(OpContext& ctx) const override {
    if (!ctx.has_input(0)) return InvalidArgument(ctx, "needs input A");
    const Tensor& a = ctx.input(0);
    const int64_t K = w_.dim(0), N = w_.dim(1);
    if (a.dtype() != DType::kFloat32) return InvalidArgument(ctx, "A must be float32, got ", DTypeName(a.dtype()));
    if (a.rank() < 1 || a.dim(-1) != K)
      return InvalidArgument(ctx, "inner dimensions differ: ", ShapeToString(a.shape()), " x [", K, ", ", N, "]");
    if (absl::Status st = PrepareWeights(ctx.thread_pool()); !st.ok()) return st;
    Shape out = a.shape();
    out.back() = N;
    Tensor& y = ctx.AllocateOutputUninitialized(0, DType::kFloat32, out);
    if (y.num_elements() == 0) return absl::OkStatus();
    const int64_t rows = a.num_elements() / K;
    if (q4())
      MatMulQ4(rows, a.data<float>(), q4_, y.data<float>(), ctx.thread_pool());
    else
      MatMulA8W8(rows, a.data<float>(), s8_, y.data<float>(), ctx.thread_pool());
    return absl::OkStatus();
  }

 private:
  bool q4() const { return w_.dtype() == DType::kInt4 || w_.dtype() == DType::kUInt4; }

  // code = q + 8 (int4) or q (uint4); d = s; m = -(zp + 8) s or -zp s (see gemm_q4.h).
  absl::Status PackQ4(ThreadPool* pool) const {
    const int64_t K = w_.dim(0), N = w_.dim(1), bs = block_size_;
    const bool is_signed = w_.dtype() == DType::kInt4;
    const uint8_t* wp = w_.data<uint8_t>();
    const float* sp = s_.data<float>();
    const uint8_t* zp = zp_.dtype() == DType::kUndefined ? nullptr : zp_.data<uint8_t>();
    const int32_t bias = is_signed ? 8 : 0;
    // Block row by block row: the source is [K, N] row-major, so each block's 32 rows are one
    // contiguous range whose file pages are dropped as soon as they are read.
    auto fill = [&](int64_t b, uint8_t* codes, float* d, float* m) {
      for (int64_t i = 0; i < kQ4Block; ++i) {
        const int64_t row = (b * kQ4Block + i) * N;
        for (int64_t n = 0; n < N; ++n)
          codes[n * kQ4Block + i] = static_cast<uint8_t>(Nibble(wp, row + n, is_signed) + bias);
      }
      const int64_t srow = b * kQ4Block / bs;
      for (int64_t n = 0; n < N; ++n) {
        const float s = sp[srow * N + n];
        const int32_t z = zp ? Nibble(zp, srow * N + n, is_signed) : 0;
        d[n] = s;
        m[n] = -static_cast<float>(z + bias) * s;
      }
      const int64_t first = b * kQ4Block * N / 2, last = ((b + 1) * kQ4Block * N + 1) / 2;
      ReleaseMappedPages(Tensor::View(DType::kUInt8, {last - first}, const_cast<uint8_t*>(wp) + first));
      return absl::OkStatus();
    };
    // Scales a float16 holds exactly (as export-qwen3 writes them) are stored as float16; float32
    // scales without zero points (m = -8 d) as d alone; others as float32 d and m.
    float c = 0.0f;
    const Q4ScaleFormat format = ChooseQ4ScaleFormat(s_.num_elements(), [&](int64_t i) {
      const int32_t z = zp ? Nibble(zp, i, is_signed) : 0;
      return std::pair<float, float>(sp[i], -static_cast<float>(z + bias) * sp[i]);
    }, &c);
    auto packed = PackedWeightsQ4::PackBlocksWith(K, N, fill, pool, format, c);
    if (!packed.ok()) return absl::InvalidArgumentError(absl::StrCat(name_, ": ", packed.status().message()));
    q4_ = std::move(*packed);
    return absl::OkStatus();
  }

  absl::Status PackS8() const {
    const int64_t K = w_.dim(0), N = w_.dim(1);
    std::vector<float> scales(static_cast<size_t>(N), s_.data<float>()[0]);
    if (s_.num_elements() == N) std::memcpy(scales.data(), s_.data<float>(), N * sizeof(float));
    if (w_.dtype() == DType::kInt8) {
      // Rows already packed drop their file pages: lm_head's source never stays whole.
      int64_t released = 0;
      auto rows_done = [&](int64_t rows) {
        uint8_t* base = const_cast<uint8_t*>(w_.data<uint8_t>());
        ReleaseMappedPages(Tensor::View(DType::kUInt8, {(rows - released) * N}, base + released * N));
        released = rows;
      };
      s8_ = A8W8Weights::FromInt8(w_.data<int8_t>(), K, N, N, scales.data(), rows_done);
    } else {  // uint8 with zero point 128: q - 128 is the signed code
      std::vector<int8_t> codes(static_cast<size_t>(K * N));
      const uint8_t* p = w_.data<uint8_t>();
      for (int64_t i = 0; i < K * N; ++i) codes[i] = static_cast<int8_t>(p[i] ^ 0x80);
      s8_ = A8W8Weights::FromInt8(codes.data(), K, N, N, scales.data());
    }
    return absl::OkStatus();
  }

  std::string name_;
  Tensor w_, s_, zp_;
  int64_t block_size_;
  mutable std::once_flag once_;
  mutable absl::Status status_;
  mutable PackedWeightsQ4 q4_;
  mutable A8W8Weights s8_;
};

absl::StatusOr<std::unique_ptr<OpKernel>> MakeWeightDequantMatMul(const KernelInit& init) {
  const Node& n = init.node();
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": ", why));
  };
  const Tensor* w = init.ConstantInput(1);
  const Tensor* s = init.ConstantInput(2);
  const Tensor* zp = n.HasInput(3) ? init.ConstantInput(3) : nullptr;
  if (w == nullptr || s == nullptr || (n.HasInput(3) && zp == nullptr))
    return bad("weight, scale and zero point must be constants");
  if (w->rank() != 2 || s->dtype() != DType::kFloat32) return bad("needs a 2-D weight and float32 scales");
  const int64_t K = w->dim(0), N = w->dim(1), bs = n.GetInt(internal_ops::WeightDequantMatMul::kBlockSize, 0);
  if (zp != nullptr && (zp->dtype() != w->dtype() || zp->num_elements() != s->num_elements()))
    return bad("zero point does not match the weight type or the scale shape");
  switch (w->dtype()) {
    case DType::kInt4:
    case DType::kUInt4:
      if (bs <= 0 || bs % kQ4Block != 0) return bad(absl::StrCat("block_size ", bs, " is not a multiple of 32"));
      if (K % bs != 0) return bad(absl::StrCat("block_size ", bs, " does not divide K = ", K));
      if (s->rank() != 2 || s->dim(0) != K / bs || s->dim(1) != N)
        return bad(absl::StrCat("scale ", ShapeToString(s->shape()), " does not fit weight ",
                                ShapeToString(w->shape()), " with block_size ", bs));
      break;
    case DType::kInt8:
    case DType::kUInt8:
      if (K > PackedWeightsS8::kMaxK) return bad(absl::StrCat("K = ", K, " exceeds the int8 GEMM's limit"));
      if (s->num_elements() != 1 && s->num_elements() != N) return bad("int8 scales must be per tensor or per column");
      if (w->dtype() == DType::kUInt8 && zp == nullptr) return bad("uint8 weights need zero point 128");
      if (zp != nullptr)
        for (int64_t i = 0; i < zp->num_elements(); ++i)
          if (zp->data<uint8_t>()[i] != (w->dtype() == DType::kInt8 ? 0 : 128))
            return bad("int8 zero points must be 0 (uint8: 128)");
      break;
    default:
      return bad(absl::StrCat("unsupported weight type ", DTypeName(w->dtype())));
  }
  return std::unique_ptr<OpKernel>(new WeightDequantMatMulKernel(
      n.Describe(), *w, *s, zp != nullptr ? *zp : Tensor(), bs));
}

}  // namespace

void RegisterWeightDequantOps(KernelRegistry& r) {
  r.Add(internal_ops::kDomain, internal_ops::WeightDequantMatMul::kName, internal_ops::kOpset, internal_ops::kOpset,
        MakeWeightDequantMatMul);
}

}  // namespace oneinfer
