// The engine's internal fused nodes (domain oneinfer.internal), made by graph passes and never
// read from a model file: the stacked KV cache's appends (FuseStackedKVCache), RMSNorm
// (FuseRMSNorm), SoftmaxAttention (FuseSoftmaxAttention), RotateHalf (FuseRotateHalf) and SiLU
// (FuseSiLU).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ops/kernel.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "graph/internal_ops.h"
#include "ops/families.h"
#include "ops/kv_block.h"
#include "ops/gemm/sgemm.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

// KVCacheAppend(past [N, ...slot], new [...slot with S at axis], buffer?) -> slot view (, buffer)
// slot s of the buffer = past slot s followed by new along `axis` (of the slot's dims). Growing
// (the node's `grow` and the run's RunOptions::grow_kv_in_place), the buffer is a KV block; a
// donated past that is one with room for S more rows becomes the buffer and only new is copied.
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
  const bool grow = ctx.node().GetInt(Op::kGrow, 0) != 0 && ctx.run_control().grow_kv_in_place;
  const int64_t past_cap = RowCapacity(past, P);
  Tensor buffer;
  if (s == 0) {
    if (grow && IsWholeKVBlock(past) && past_cap >= P + S && ctx.InputDonated(0)) {
      buffer = Tensor::Wrap(past.dtype(), buffer_shape, past.holder(), past.holder().get());  // grows in place
    } else {
      Shape reserve = buffer_shape;
      reserve[static_cast<size_t>(axis) + 1] = internal_ops::KVCacheCapacity(P + S);
      Tensor block = ctx.AllocateTemp(past.dtype(), reserve, /*zero=*/false);
      std::shared_ptr<void> holder = block.holder();
      if (grow) holder = TagKVBlock(block.raw_data(), reserve[static_cast<size_t>(axis) + 1], std::move(holder));
      buffer = Tensor::Wrap(past.dtype(), buffer_shape, std::move(holder), block.raw_data());
    }
    ctx.SetOutput(1, buffer);
  } else {
    buffer = ctx.input(2);  // written in place: each append owns its own slot
    if (buffer.shape() != buffer_shape) {
      return InvalidArgument(ctx, "cache buffer ", ShapeToString(buffer.shape()), " should be ", ShapeToString(buffer_shape));
    }
  }
  const bool in_place = buffer.raw_data() == past.raw_data();  // the past's rows are there already
  const int64_t cap = RowCapacity(buffer, P + S);
  const size_t es = DTypeSize(past.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= slot_shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < slot_shape.size(); ++d) inner *= slot_shape[d];
  // Byte sizes of one group of rows (the dims before the axis index the groups).
  const size_t row = static_cast<size_t>(inner) * es, group = static_cast<size_t>(cap) * row,
               past_group = static_cast<size_t>(past_cap) * row, new_rows = static_cast<size_t>(S) * row;
  char* dst = static_cast<char*>(buffer.raw_data()) + static_cast<size_t>(s * outer) * group;
  const char* src_past = static_cast<const char*>(past.raw_data()) + static_cast<size_t>(s * outer) * past_group;
  const char* src_new = static_cast<const char*>(fresh.raw_data());
  const size_t group_bytes = (in_place ? 0 : static_cast<size_t>(P) * row) + new_rows;
  ParallelFor(ctx.thread_pool(), outer, KVCopyGrain(group_bytes), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      char* d = dst + static_cast<size_t>(o) * group;
      if (!in_place && P > 0) std::memcpy(d, src_past + static_cast<size_t>(o) * past_group, static_cast<size_t>(P) * row);
      std::memcpy(d + static_cast<size_t>(P) * row, src_new + static_cast<size_t>(o) * new_rows, new_rows);
    }
  });
  // The layer reads its slot in place: a view that keeps the buffer alive.
  ctx.SetOutput(0, Tensor::Wrap(past.dtype(), slot_shape, buffer.holder(), dst));
  return absl::OkStatus();
}

// SoftmaxAttention(q [..., M, D], k [..., T, D], v [..., T, Dv], mask?) -> [..., M, Dv]: per batch
// matrix the unfused chain's steps and roundings (FusedMatMul's GEMM with alpha, times scale, plus
// mask, the Softmax op's row arithmetic, MatMul's GEMM), one task per batch matrix with its scores
// in a scratch row block instead of three graph tensors.
absl::Status SoftmaxAttentionCompute(OpContext& ctx) {
  using Op = internal_ops::SoftmaxAttention;
  const Tensor& q = ctx.input(Op::kQ);
  const Tensor& k = ctx.input(Op::kK);
  const Tensor& v = ctx.input(Op::kV);
  const bool masked = ctx.has_input(Op::kMask);
  for (const Tensor* t : {&q, &k, &v}) {
    if (t->dtype() != DType::kFloat32 || t->rank() < 2) {
      return InvalidArgument(ctx, "q, k and v must be float32 of rank 2 or more, got ", DTypeName(t->dtype()), " ",
                             ShapeToString(t->shape()));
    }
  }
  const int64_t M = q.dim(-2), D = q.dim(-1), T = k.dim(-2), Dv = v.dim(-1);
  if (k.dim(-1) != D || v.dim(-2) != T) {
    return InvalidArgument(ctx, "q ", ShapeToString(q.shape()), ", k ", ShapeToString(k.shape()), " and v ",
                           ShapeToString(v.shape()), " do not make q k^T v");
  }
  auto batch_of = [](const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); };
  // With kv_repeat = n, k and v's last batch axis (the heads) is read as if each head came n
  // times in a row: their batch shapes are the repeated ones, and a repeated index i is head i / n.
  const int64_t repeat = ctx.node().GetInt(Op::kKVRepeat, 1);
  if (repeat < 1) return InvalidArgument(ctx, "kv_repeat must be 1 or more, got ", repeat);
  if (repeat > 1 && (k.rank() < 3 || v.rank() < 3)) {
    return InvalidArgument(ctx, "kv_repeat ", repeat, " needs k and v with a head axis, got k ", ShapeToString(k.shape()),
                           " and v ", ShapeToString(v.shape()));
  }
  auto repeated_batch_of = [&](const Tensor& t) {
    Shape b = batch_of(t);
    if (repeat > 1) b.back() *= repeat;
    return b;
  };
  const Shape kb = repeated_batch_of(k), vb = repeated_batch_of(v);
  auto batch = BroadcastShapes({batch_of(q), kb, vb});
  if (!batch.ok()) return InvalidArgument(ctx, "batch dimensions do not broadcast: ", batch.status().message());
  Shape scores_shape = *batch;
  scores_shape.insert(scores_shape.end(), {M, T});
  std::vector<int64_t> mask_strides;
  const float* mask = nullptr;
  if (masked) {
    const Tensor& m = ctx.input(Op::kMask);
    auto both = BroadcastShapes({scores_shape, m.shape()});
    if (m.dtype() != DType::kFloat32 || !both.ok() || *both != scores_shape) {
      return InvalidArgument(ctx, "mask ", DTypeName(m.dtype()), " ", ShapeToString(m.shape()),
                             " does not broadcast to the scores ", ShapeToString(scores_shape));
    }
    mask_strides = BroadcastStrides(m.shape(), scores_shape);
    mask = m.data<float>();
  }
  Shape out_shape = *batch;
  out_shape.insert(out_shape.end(), {M, Dv});
  Tensor& y = ctx.AllocateOutputUninitialized(0, DType::kFloat32, out_shape);
  if (y.num_elements() == 0) return absl::OkStatus();
  const float alpha = ctx.node().GetFloat(Op::kAlpha, 1.0f);
  const bool scaled = ctx.node().HasAttr(Op::kScale);
  const float scale = ctx.node().GetFloat(Op::kScale, 1.0f);
  // k and v may be slot views of a growing KV cache: their matrices' rows at its capacity stride.
  const int64_t k_matrix = RowCapacity(k, T) * D, v_matrix = RowCapacity(v, T) * Dv;
  const int64_t nb = NumElements(*batch);
  const std::vector<int64_t> sq = BroadcastStrides(batch_of(q), *batch), sk = BroadcastStrides(kb, *batch),
                             sv = BroadcastStrides(vb, *batch), so = Strides(*batch);
  const size_t nbd = batch->size();
  // A repeated matrix index -> the stored one: (outer, head) of heads * n -> (outer, head / n).
  const int64_t k_heads = kb.back(), v_heads = vb.back();
  auto stored = [repeat](int64_t i, int64_t heads) { return repeat == 1 ? i : i / heads * (heads / repeat) + i % heads / repeat; };
  ParallelFor(ctx.thread_pool(), nb, 1, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> s;  // the scores, reused: a decode step makes ~450 of these calls
    s.resize(static_cast<size_t>(M * T));
    for (int64_t i = i0; i < i1; ++i) {
      int64_t iq = 0, ik = 0, iv = 0, im = 0, rem = i;
      for (size_t d = 0; d < nbd; ++d) {
        const int64_t idx = rem / so[d];
        rem %= so[d];
        iq += idx * sq[d];
        ik += idx * sk[d];
        iv += idx * sv[d];
        if (mask != nullptr) im += idx * mask_strides[d];
      }
      ik = stored(ik, k_heads);
      iv = stored(iv, v_heads);
      float* out = y.data<float>() + i * M * Dv;
      if (T == 0) {  // softmax of an empty row is empty: the product with no keys is zero
        std::fill(out, out + M * Dv, 0.0f);
        continue;
      }
      Sgemm(false, true, M, T, D, alpha, q.data<float>() + iq * M * D, D, k.data<float>() + ik * k_matrix, D, 0.0f,
            s.data(), T, nullptr);
      for (int64_t r = 0; r < M; ++r) {
        float* row = s.data() + r * T;
        if (scaled) for (int64_t t = 0; t < T; ++t) row[t] *= scale;
        if (mask != nullptr) {
          const float* mrow = mask + im + r * mask_strides[nbd];
          const int64_t mt = mask_strides[nbd + 1];
          for (int64_t t = 0; t < T; ++t) row[t] += mrow[t * mt];
        }
        SoftmaxRowF32(row, row, T);
      }
      Sgemm(false, false, M, Dv, T, 1.0f, s.data(), T, v.data<float>() + iv * v_matrix, Dv, 0.0f, out, Dv, nullptr);
    }
  });
  return absl::OkStatus();
}

// RotateHalf(t [..., D], cos, sin) = t * cos + concat(-t[..., D/2:], t[..., :D/2]) * sin, cos and
// sin broadcast to t; the products and the sum rounded as the unfused Mul, Mul and Add round them.
absl::Status RotateHalfCompute(OpContext& ctx) {
  using Op = internal_ops::RotateHalf;
  const Tensor& t = ctx.input(Op::kT);
  const Tensor& cos = ctx.input(Op::kCos);
  const Tensor& sin = ctx.input(Op::kSin);
  if (t.dtype() != DType::kFloat32 || cos.dtype() != DType::kFloat32 || sin.dtype() != DType::kFloat32 || t.rank() < 1 ||
      t.dim(-1) % 2 != 0) {
    return InvalidArgument(ctx, "RotateHalf needs float32 t with an even last axis and float32 cos and sin, got ",
                           DTypeName(t.dtype()), " ", ShapeToString(t.shape()), ", ", DTypeName(cos.dtype()), ", ",
                           DTypeName(sin.dtype()));
  }
  for (const Tensor* c : {&cos, &sin}) {
    auto both = BroadcastShapes({t.shape(), c->shape()});
    if (!both.ok() || *both != t.shape()) {
      return InvalidArgument(ctx, "cos/sin ", ShapeToString(c->shape()), " do not broadcast to ", ShapeToString(t.shape()));
    }
  }
  Tensor& y = ctx.AllocateOutputUninitialized(0, DType::kFloat32, t.shape());
  const int64_t D = t.dim(-1), half = D / 2, rows = D ? t.num_elements() / D : 0;
  if (rows == 0) return absl::OkStatus();
  const Shape row_shape(t.shape().begin(), t.shape().end() - 1);
  const std::vector<int64_t> rs = Strides(row_shape);
  const std::vector<int64_t> cs = BroadcastStrides(cos.shape(), t.shape()), ss = BroadcastStrides(sin.shape(), t.shape());
  const size_t r = row_shape.size();
  const float* tp = t.data<float>();
  const float* cp = cos.data<float>();
  const float* sp = sin.data<float>();
  float* yp = y.data<float>();
  ParallelFor(ctx.thread_pool(), rows, std::max<int64_t>(1, 16384 / D), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      int64_t co = 0, so = 0, rem = row;
      for (size_t d = 0; d < r; ++d) {
        const int64_t idx = rem / rs[d];
        rem %= rs[d];
        co += idx * cs[d];
        so += idx * ss[d];
      }
      const float* x = tp + row * D;
      float* out = yp + row * D;
      const int64_t cj = cs[r], sj = ss[r];
      const float* c = cp + co;
      const float* sn = sp + so;
      if (cj == 1 && sj == 1) {  // cos and sin rows in place: two branch-free (vectorised) halves
        for (int64_t j = 0; j < half; ++j) out[j] = x[j] * c[j] + -x[j + half] * sn[j];
        for (int64_t j = half; j < D; ++j) out[j] = x[j] * c[j] + x[j - half] * sn[j];
        continue;
      }
      for (int64_t j = 0; j < D; ++j) {
        const float rot = j < half ? -x[j + half] : x[j - half];
        out[j] = x[j] * c[j * cj] + rot * sn[j * sj];
      }
    }
  });
  return absl::OkStatus();
}

// SiLU(x, m?) = x * sigmoid(x) [* m], float32, m of x's shape: SigmoidF32 (the Sigmoid op's)
// and the products rounded one at a time as the unfused Muls round them, in one pass.
absl::Status SiLUCompute(OpContext& ctx) {
  using Op = internal_ops::SiLU;
  const Tensor& x = ctx.input(Op::kX);
  const bool gated = ctx.has_input(Op::kMul);
  const Tensor* m = gated ? &ctx.input(Op::kMul) : nullptr;
  if (x.dtype() != DType::kFloat32 || (gated && m->dtype() != DType::kFloat32)) {
    return InvalidArgument(ctx, "SiLU needs float32 x and m, got ", DTypeName(x.dtype()),
                           gated ? absl::StrCat(" and ", DTypeName(m->dtype())) : std::string());
  }
  if (gated && m->shape() != x.shape()) {
    return InvalidArgument(ctx, "m ", ShapeToString(m->shape()), " is not x's shape ", ShapeToString(x.shape()));
  }
  Tensor& y = ctx.AllocateOutputUninitialized(0, DType::kFloat32, x.shape());
  const float* px = x.data<float>();
  const float* pm = gated ? m->data<float>() : nullptr;
  float* py = y.data<float>();
  // Chunks of 4096: a 16-sequence decode step's 16 x 3072 MLP rows on both threads.
  ParallelFor(ctx.thread_pool(), x.num_elements(), 4096, [&](int64_t b, int64_t e) {
    constexpr int64_t kBlock = 256;
    float s[kBlock];
    for (int64_t i = b; i < e; i += kBlock) {
      const int64_t n = std::min(kBlock, e - i);
      SigmoidF32(px + i, s, n);
      if (gated) {
        for (int64_t j = 0; j < n; ++j) {
          const float a = px[i + j] * s[j];
          py[i + j] = a * pm[i + j];
        }
      } else {
        for (int64_t j = 0; j < n; ++j) py[i + j] = px[i + j] * s[j];
      }
    }
  });
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
  ParallelFor(ctx.thread_pool(), rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(D, 1)), [&](int64_t b, int64_t e) {
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
  // Each row normalised on its own, its reduction in one order for rows of whole cache lines (the
  // batched path stacks only those): a batch's decode step normalises every row in one call.
  r.Add(kDomain, internal_ops::RMSNorm::kName, kOpset, kOpset, MakeRowwiseFnKernel(RMSNormCompute));
  r.AddFn(kDomain, internal_ops::KVCacheAppend::kName, kOpset, kOpset, AppendCompute);
  r.AddFn(kDomain, internal_ops::KVCacheFinish::kName, kOpset, kOpset, FinishCompute);
  r.AddFn(kDomain, internal_ops::SoftmaxAttention::kName, kOpset, kOpset, SoftmaxAttentionCompute);
  r.AddFn(kDomain, internal_ops::RotateHalf::kName, kOpset, kOpset, RotateHalfCompute);
  // Elementwise: a batch's decode step takes every sequence's MLP rows in one call.
  r.Add(kDomain, internal_ops::SiLU::kName, kOpset, kOpset, MakeRowwiseFnKernel(SiLUCompute));
}

}  // namespace oneinfer
