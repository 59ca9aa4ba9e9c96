// The engine's internal fused nodes (domain oneinfer.internal), made by graph passes and never
// read from a model file: the stacked KV cache's appends (FuseStackedKVCache) and RMSNorm
// (FuseRMSNorm).
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/kernel.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "graph/internal_ops.h"
#include "ops/families.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

// KVCacheAppend(past [N, ...slot], new [...slot with S at axis], buffer?) -> slot view (, buffer)
// slot s of the buffer = past slot s followed by new along `axis` (of the slot's dims).
absl::Status AppendCompute(OpContext& ctx) {
  using Op = internal_ops::KVCacheAppend;
  const int64_t s = ctx.node().GetInt(Op::kSlot, 0), axis = ctx.node().GetInt(Op::kAxis, 1);
  const Tensor& past = ctx.input(0);
  const Tensor& fresh = ctx.input(1);
  if (past.rank() < 2 || fresh.rank() != past.rank() - 1 || axis < 0 || axis >= fresh.rank() ||
      past.dtype() != fresh.dtype() || s >= past.dim(0)) {
    return InvalidArgument(ctx, "KV cache ", ShapeToString(past.shape()), " and new entries ",
                           ShapeToString(fresh.shape()), " do not fit slot ", s);
  }
  Shape slot_shape(past.shape().begin() + 1, past.shape().end());
  for (int64_t d = 0; d < fresh.rank(); ++d) {
    if (d != axis && fresh.dim(d) != slot_shape[static_cast<size_t>(d)]) {
      return InvalidArgument(ctx, "new entries ", ShapeToString(fresh.shape()), " do not match the cache ",
                             ShapeToString(past.shape()));
    }
  }
  const int64_t P = slot_shape[static_cast<size_t>(axis)], S = fresh.dim(axis);
  slot_shape[static_cast<size_t>(axis)] = P + S;
  Shape buffer_shape = slot_shape;
  buffer_shape.insert(buffer_shape.begin(), past.dim(0));
  Tensor buffer;
  if (s == 0) {
    Shape reserve = buffer_shape;
    reserve[static_cast<size_t>(axis) + 1] = internal_ops::KVCacheCapacity(P + S);
    Tensor block = ctx.AllocateTemp(past.dtype(), reserve, /*zero=*/false);
    buffer = Tensor::Wrap(past.dtype(), buffer_shape, block.holder(), block.raw_data());
    ctx.SetOutput(1, buffer);
  } else {
    buffer = ctx.input(2);  // written in place: each append owns its own slot
    if (buffer.shape() != buffer_shape) {
      return InvalidArgument(ctx, "cache buffer ", ShapeToString(buffer.shape()), " should be ", ShapeToString(buffer_shape));
    }
  }
  const size_t es = DTypeSize(past.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= slot_shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < slot_shape.size(); ++d) inner *= slot_shape[d];
  const int64_t slot_elems = NumElements(slot_shape);
  char* dst = static_cast<char*>(buffer.raw_data()) + static_cast<size_t>(s * slot_elems) * es;
  const char* src_past = static_cast<const char*>(past.raw_data()) + static_cast<size_t>(s * outer * P * inner) * es;
  const char* src_new = static_cast<const char*>(fresh.raw_data());
  const size_t past_row = static_cast<size_t>(P * inner) * es, new_row = static_cast<size_t>(S * inner) * es;
  ParallelFor(ctx.thread_pool(), outer, 4, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      char* d = dst + static_cast<size_t>(o) * (past_row + new_row);
      std::memcpy(d, src_past + static_cast<size_t>(o) * past_row, past_row);
      std::memcpy(d + past_row, src_new + static_cast<size_t>(o) * new_row, new_row);
    }
  });
  // The layer reads its slot in place: a view that keeps the buffer alive.
  ctx.SetOutput(0, Tensor::Wrap(past.dtype(), slot_shape, buffer.holder(), dst));
  return absl::OkStatus();
}

// KVCacheFinish(buffer, slot views...) -> buffer, once every append has written its slot.
absl::Status FinishCompute(OpContext& ctx) {
  ctx.SetOutput(0, ctx.input(0));
  return absl::OkStatus();
}

// RMSNorm(x [..., D], w [D]) = x / sqrt(mean(x^2 over D) + epsilon) * w (or x * (1 / sqrt(...)) * w
// when `reciprocal`), in float32 with the unfused chain's operation order; float16 x and w: x
// widened, the normalised row rounded to float16, then times w rounded again (rms_norm_fusion.cc).
absl::Status RMSNormCompute(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const bool half = x.dtype() == DType::kFloat16;
  if ((x.dtype() != DType::kFloat32 && !half) || w.dtype() != x.dtype() || x.rank() < 1 || w.rank() != 1 ||
      w.dim(0) != x.dim(-1)) {
    return InvalidArgument(ctx, "RMSNorm of ", DTypeName(x.dtype()), " ", ShapeToString(x.shape()), " with ",
                           DTypeName(w.dtype()), " weight ", ShapeToString(w.shape()),
                           " (needs float32 or float16 for both, the weight as long as x's last axis)");
  }
  using Op = internal_ops::RMSNorm;
  const float eps = ctx.node().GetFloat(Op::kEpsilon, Op::kDefaultEpsilon);
  const bool reciprocal = ctx.node().GetInt(Op::kReciprocal, 0) != 0;
  const int64_t D = x.dim(-1), rows = D ? x.num_elements() / D : 0;
  Tensor& y = ctx.AllocateOutputUninitialized(0, x.dtype(), x.shape());
  std::vector<float> w32;
  if (half) {
    w32.resize(static_cast<size_t>(D));
    WidenF16(w.data<uint16_t>(), w32.data(), D);
  }
  const float* pw = half ? w32.data() : w.data<float>();
  ParallelFor(ctx.thread_pool(), rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(D, 1)), [&](int64_t b, int64_t e) {
    std::vector<float> row(half ? static_cast<size_t>(D) : 0);
    Eigen::Map<const Eigen::ArrayXf> wr(pw, D);
    for (int64_t r = b; r < e; ++r) {
      const float* xp = half ? row.data() : x.data<float>() + r * D;
      if (half) WidenF16(x.data<uint16_t>() + r * D, row.data(), D);
      Eigen::Map<const Eigen::ArrayXf> xr(xp, D);
      // ReduceMean's sum and division, Add, Sqrt, then Div(x, den) or Mul(x, Div(1, den)).
      const float den = std::sqrt((0.0f + xr.square().sum()) / static_cast<float>(D) + eps);
      if (!half) {
        Eigen::Map<Eigen::ArrayXf> yr(y.data<float>() + r * D, D);
        if (reciprocal) yr = xr * (1.0f / den) * wr;
        else yr = xr / den * wr;
        continue;
      }
      // In bulk (F16C): the normalised row, its Cast to float16, the float16 Mul by w.
      uint16_t* yp = y.data<uint16_t>() + r * D;
      Eigen::Map<Eigen::ArrayXf> nr(row.data(), D);
      if (reciprocal) nr = xr * (1.0f / den);
      else nr = xr / den;
      NarrowToF16(row.data(), yp, D);
      WidenF16(yp, row.data(), D);
      nr *= wr;
      NarrowToF16(row.data(), yp, D);
    }
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterFusedOps(KernelRegistry& r) {
  using internal_ops::kDomain, internal_ops::kOpset;
  r.AddFn(kDomain, internal_ops::RMSNorm::kName, kOpset, kOpset, RMSNormCompute);
  r.AddFn(kDomain, internal_ops::KVCacheAppend::kName, kOpset, kOpset, AppendCompute);
  r.AddFn(kDomain, internal_ops::KVCacheFinish::kName, kOpset, kOpset, FinishCompute);
}

}  // namespace oneinfer
