// The ai.onnx attention operators of opset 23: Attention (see ops/onnx_attention.h for the
// layouts and semantics) and RotaryEmbedding (its rotation shared with com.microsoft
// RotaryEmbedding, ops/contrib_attention.h). float16 inputs are widened to float32, computed
// there (softmax included) and every output rounded once; bfloat16 and double are refused.
#include "ops/onnx_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "ops/contrib_attention.h"
#include "ops/families.h"
#include "ops/float_elements.h"
#include "ops/kernel.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool IsAttnType(DType t) { return t == DType::kFloat32 || t == DType::kFloat16; }

const Tensor* Opt(const OpContext& ctx, size_t i) {
  return ctx.num_inputs() > i && ctx.has_input(i) ? &ctx.input(i) : nullptr;
}

// --- Attention --------------------------------------------------------------------------------

enum AttnIn : size_t { kQ, kK, kV, kMask, kPastKey, kPastValue };

struct AttnGeom {
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, L = 0, P = 0, T = 0, D = 0, Dv = 0;
  bool three_d = false;
  std::vector<int64_t> mask_strides;  // over [B, Hq, Sq, T]; empty without a mask
};

class AttentionKernel : public OpKernel {
 public:
  explicit AttentionKernel(const AttentionAttrs& a) : a_(a) {}
  absl::Status Compute(OpContext& ctx) const override;

 private:
  absl::Status Check(OpContext& ctx, AttnGeom* g) const;
  AttentionAttrs a_;
};

absl::Status AttentionKernel::Check(OpContext& ctx, AttnGeom* g) const {
  const Tensor& q = ctx.input(kQ);
  const Tensor& k = ctx.input(kK);
  const Tensor& v = ctx.input(kV);
  if (!IsAttnType(q.dtype()))
    return Unimplemented(ctx.node(), "Q of type ", DTypeName(q.dtype()), " is not implemented (float32, float16)");
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    return InvalidArgument(ctx, "K and V must be ", DTypeName(q.dtype()), " as Q is, got ", DTypeName(k.dtype()), " and ",
                           DTypeName(v.dtype()));
  if (q.rank() != k.rank() || q.rank() != v.rank() || (q.rank() != 3 && q.rank() != 4))
    return InvalidArgument(ctx, "Q, K and V must all be 3-D or all 4-D, got ", ShapeToString(q.shape()), ", ",
                           ShapeToString(k.shape()), " and ", ShapeToString(v.shape()));
  g->three_d = q.rank() == 3;
  g->B = q.dim(0);
  if (k.dim(0) != g->B || v.dim(0) != g->B) return InvalidArgument(ctx, "Q, K and V have different batch sizes");
  if (g->three_d) {
    if (a_.q_num_heads <= 0 || a_.kv_num_heads <= 0)
      return InvalidArgument(ctx, "3-D inputs need positive q_num_heads and kv_num_heads attributes");
    g->Hq = a_.q_num_heads;
    g->Hkv = a_.kv_num_heads;
    g->Sq = q.dim(1);
    g->L = k.dim(1);
    if (q.dim(2) % g->Hq != 0 || k.dim(2) % g->Hkv != 0 || v.dim(2) % g->Hkv != 0)
      return InvalidArgument(ctx, "hidden sizes of Q ", ShapeToString(q.shape()), ", K ", ShapeToString(k.shape()), " and V ",
                             ShapeToString(v.shape()), " do not split into q_num_heads ", g->Hq, " and kv_num_heads ", g->Hkv);
    g->D = q.dim(2) / g->Hq;
    g->Dv = v.dim(2) / g->Hkv;
    if (k.dim(2) / g->Hkv != g->D)
      return InvalidArgument(ctx, "K's head size ", k.dim(2) / g->Hkv, " differs from Q's ", g->D);
    if (v.dim(1) != g->L) return InvalidArgument(ctx, "K and V have different sequence lengths");
  } else {
    g->Hq = q.dim(1);
    g->Hkv = k.dim(1);
    g->Sq = q.dim(2);
    g->L = k.dim(2);
    g->D = q.dim(3);
    g->Dv = v.dim(3);
    if ((a_.q_num_heads > 0 && a_.q_num_heads != g->Hq) || (a_.kv_num_heads > 0 && a_.kv_num_heads != g->Hkv))
      return InvalidArgument(ctx, "q_num_heads ", a_.q_num_heads, " / kv_num_heads ", a_.kv_num_heads,
                             " disagree with the 4-D inputs' heads ", g->Hq, " / ", g->Hkv);
    if (k.dim(3) != g->D) return InvalidArgument(ctx, "K's head size ", k.dim(3), " differs from Q's ", g->D);
    if (v.dim(1) != g->Hkv || v.dim(2) != g->L)
      return InvalidArgument(ctx, "V ", ShapeToString(v.shape()), " does not match K ", ShapeToString(k.shape()));
  }
  if (g->Hq <= 0 || g->Hkv <= 0 || g->Hq % g->Hkv != 0)
    return InvalidArgument(ctx, "query heads ", g->Hq, " must be a positive multiple of key/value heads ", g->Hkv);
  const Tensor* pk = Opt(ctx, kPastKey);
  const Tensor* pv = Opt(ctx, kPastValue);
  if ((pk == nullptr) != (pv == nullptr)) return InvalidArgument(ctx, "past_key and past_value must be given together");
  if (pk != nullptr) {
    if (pk->dtype() != q.dtype() || pv->dtype() != q.dtype())
      return InvalidArgument(ctx, "past_key and past_value must be ", DTypeName(q.dtype()), " as Q is");
    if (pk->rank() != 4 || pk->dim(0) != g->B || pk->dim(1) != g->Hkv || pk->dim(3) != g->D)
      return InvalidArgument(ctx, "past_key ", ShapeToString(pk->shape()), " must be [", g->B, ", ", g->Hkv, ", past, ", g->D, "]");
    g->P = pk->dim(2);
    if (pv->rank() != 4 || pv->dim(0) != g->B || pv->dim(1) != g->Hkv || pv->dim(2) != g->P || pv->dim(3) != g->Dv)
      return InvalidArgument(ctx, "past_value ", ShapeToString(pv->shape()), " must be [", g->B, ", ", g->Hkv, ", ", g->P,
                             ", ", g->Dv, "]");
  }
  g->T = g->P + g->L;
  if (const Tensor* m = Opt(ctx, kMask)) {
    if (m->dtype() != DType::kBool && m->dtype() != q.dtype())
      return InvalidArgument(ctx, "attn_mask must be bool or ", DTypeName(q.dtype()), " (Q's type), got ", DTypeName(m->dtype()));
    const Shape full = {g->B, g->Hq, g->Sq, g->T};
    if (m->rank() < 1 || m->rank() > 4 || m->dim(-1) != g->T)
      return InvalidArgument(ctx, "attn_mask ", ShapeToString(m->shape()), " must end in the total sequence length ", g->T,
                             " (past ", g->P, " + kv ", g->L, ") and broadcast to ", ShapeToString(full));
    for (int64_t i = 2; i <= m->rank(); ++i) {
      if (m->dim(-i) != 1 && m->dim(-i) != full[4 - i])
        return InvalidArgument(ctx, "attn_mask ", ShapeToString(m->shape()), " does not broadcast to ", ShapeToString(full));
    }
    g->mask_strides = BroadcastStrides(m->shape(), full);
  }
  return absl::OkStatus();
}

// Widens x, [B, S, H*D] (three_d) or [B, H, S, D], into BNSH rows [b][h][row0 + s][d] of dst,
// whose third dimension holds `rows` rows.
void WidenBnsh(const Tensor& x, bool three_d, int64_t B, int64_t H, int64_t S, int64_t D, int64_t rows, int64_t row0,
               float* dst) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t s = 0; s < S; ++s) {
        const int64_t src = three_d ? ((b * S + s) * H + h) * D : ((b * H + h) * S + s) * D;
        float* d = dst + ((b * H + h) * rows + row0 + s) * D;
        for (int64_t i = 0; i < D; ++i) d[i] = FloatAt(x, src + i);
      }
    }
  }
}

absl::Status AttentionKernel::Compute(OpContext& ctx) const {
  AttnGeom g;
  if (absl::Status s = Check(ctx, &g); !s.ok()) return s;
  const Tensor& q = ctx.input(kQ);
  const DType dt = q.dtype();
  const int64_t B = g.B, Hq = g.Hq, Hkv = g.Hkv, Sq = g.Sq, T = g.T, D = g.D, Dv = g.Dv, P = g.P;
  // Everything in float32 BNSH: present K / V (past rows first), and Q.
  std::vector<float> kf(static_cast<size_t>(B * Hkv * T * D)), vf(static_cast<size_t>(B * Hkv * T * Dv));
  std::vector<float> qf(static_cast<size_t>(B * Hq * Sq * D));
  if (P > 0) {
    WidenBnsh(ctx.input(kPastKey), false, B, Hkv, P, D, T, 0, kf.data());
    WidenBnsh(ctx.input(kPastValue), false, B, Hkv, P, Dv, T, 0, vf.data());
  }
  WidenBnsh(ctx.input(kK), g.three_d, B, Hkv, g.L, D, T, P, kf.data());
  WidenBnsh(ctx.input(kV), g.three_d, B, Hkv, g.L, Dv, T, P, vf.data());
  WidenBnsh(q, g.three_d, B, Hq, Sq, D, Sq, 0, qf.data());

  const Shape y_shape = g.three_d ? Shape{B, Sq, Hq * Dv} : Shape{B, Hq, Sq, Dv};
  Tensor& y = ctx.AllocateOutputUninitialized(0, dt, y_shape);
  auto optional_out = [&](size_t i, const Shape& s) -> Tensor* {
    return ctx.num_outputs() > i && ctx.has_output(i) ? &ctx.AllocateOutputUninitialized(i, dt, s) : nullptr;
  };
  Tensor* present_k = optional_out(1, {B, Hkv, T, D});
  Tensor* present_v = optional_out(2, {B, Hkv, T, Dv});
  Tensor* qk_out = optional_out(3, {B, Hq, Sq, T});
  // Present rows are the inputs' values: exact in float16 too (widened and rounded back).
  if (present_k != nullptr) {
    for (int64_t i = 0; i < present_k->num_elements(); ++i) SetFloatAt(*present_k, i, kf[i]);
  }
  if (present_v != nullptr) {
    for (int64_t i = 0; i < present_v->num_elements(); ++i) SetFloatAt(*present_v, i, vf[i]);
  }

  const Tensor* mask = Opt(ctx, kMask);
  const float scale = a_.scale.has_value() ? *a_.scale : 1.0f / std::sqrt(static_cast<float>(D));
  const int64_t group = Hq / Hkv;
  ParallelFor(ctx.thread_pool(), B * Hq, 1, [&](int64_t w0, int64_t w1) {
    std::vector<float> raw(T), capped(T), bias(T), p(T), acc(Dv);
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t b = w / Hq, h = w % Hq, kvh = h / group;
      const float* K = kf.data() + (b * Hkv + kvh) * T * D;
      const float* V = vf.data() + (b * Hkv + kvh) * T * Dv;
      for (int64_t i = 0; i < Sq; ++i) {
        const float* qi = qf.data() + ((b * Hq + h) * Sq + i) * D;
        float bias_max = kNegInf;
        for (int64_t j = 0; j < T; ++j) {
          float dot = 0.f;
          for (int64_t d = 0; d < D; ++d) dot += qi[d] * K[j * D + d];
          raw[j] = scale * dot;
          capped[j] = a_.softcap > 0.f ? a_.softcap * std::tanh(raw[j] / a_.softcap) : raw[j];
          float bj = 0.f;
          if (mask != nullptr) {
            const std::vector<int64_t>& st = g.mask_strides;
            const int64_t at = b * st[0] + h * st[1] + i * st[2] + j * st[3];
            bj = mask->dtype() == DType::kBool ? (mask->data<bool>()[at] ? 0.f : kNegInf) : FloatAt(*mask, at);
          }
          if (a_.is_causal && j > i + P) bj = kNegInf;  // bottom-right aligned: the past is visible
          bias[j] = bj;
          bias_max = std::max(bias_max, bj);
        }
        // A row whose every key is masked attends nothing: zeros, as the spec's reference gives.
        const bool all_masked = bias_max == kNegInf;
        float m = kNegInf;
        for (int64_t j = 0; j < T; ++j) m = std::max(m, capped[j] + bias[j]);
        float sum = 0.f;
        for (int64_t j = 0; j < T; ++j) {
          p[j] = all_masked ? 0.f : std::exp(capped[j] + bias[j] - m);
          sum += p[j];
        }
        const float inv = all_masked ? 0.f : 1.f / sum;
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int64_t j = 0; j < T; ++j) {
          p[j] *= inv;
          if (p[j] == 0.f) continue;
          for (int64_t d = 0; d < Dv; ++d) acc[d] += p[j] * V[j * Dv + d];
        }
        const int64_t yo = g.three_d ? ((b * Sq + i) * Hq + h) * Dv : ((b * Hq + h) * Sq + i) * Dv;
        for (int64_t d = 0; d < Dv; ++d) SetFloatAt(y, yo + d, acc[d]);
        if (qk_out != nullptr) {
          const int64_t qo = ((b * Hq + h) * Sq + i) * T;
          for (int64_t j = 0; j < T; ++j) {
            const float v = a_.qk_matmul_output_mode == 0   ? raw[j]
                            : a_.qk_matmul_output_mode == 1 ? capped[j]
                            : a_.qk_matmul_output_mode == 2 ? capped[j] + bias[j]
                                                            : p[j];
            SetFloatAt(*qk_out, qo + j, v);
          }
        }
      }
    }
  });
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OpKernel>> MakeAttention(const KernelInit& init) {
  const Node& n = init.node();
  auto bad = [&](const auto&... what) { return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": ", what...)); };
  AttentionAttrs a;
  a.q_num_heads = n.GetInt("q_num_heads", 0);
  a.kv_num_heads = n.GetInt("kv_num_heads", 0);
  if (a.q_num_heads < 0 || a.kv_num_heads < 0) return bad("q_num_heads and kv_num_heads must not be negative");
  if (n.HasAttr("scale")) a.scale = n.GetFloat("scale", 0.f);
  a.softcap = n.GetFloat("softcap", 0.f);
  if (!(a.softcap >= 0.f)) return bad("softcap must be 0 (none) or positive, got ", a.softcap);
  const int64_t causal = n.GetInt("is_causal", 0);
  if (causal != 0 && causal != 1) return bad("is_causal must be 0 or 1, got ", causal);
  a.is_causal = causal == 1;
  a.qk_matmul_output_mode = n.GetInt("qk_matmul_output_mode", 0);
  if (a.qk_matmul_output_mode < 0 || a.qk_matmul_output_mode > 3)
    return bad("qk_matmul_output_mode must be 0..3, got ", a.qk_matmul_output_mode);
  if (n.HasAttr("softmax_precision")) {
    // The softmax always runs in float32, which is at least float16's or bfloat16's precision.
    const int64_t sp = n.GetInt("softmax_precision", 1);
    if (sp != static_cast<int64_t>(DType::kFloat32) && sp != static_cast<int64_t>(DType::kFloat16) &&
        sp != static_cast<int64_t>(DType::kBFloat16))
      return Unimplemented(n, "softmax_precision ", sp, " is not implemented (the softmax runs in float32: 1, 10 or 16)");
  }
  return std::unique_ptr<OpKernel>(new AttentionKernel(a));
}

// --- RotaryEmbedding-23 -----------------------------------------------------------------------

// X [B, N, S, H] or [B, S, N*H] (num_heads given), cos_cache / sin_cache [positions, >= rot/2]
// read at position_ids [B, S], or [B, S, >= rot/2] without them (the spec slices the caches'
// first rot/2 columns).
absl::Status OnnxRotaryEmbedding(OpContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& x = ctx.input(0);
  const Tensor& cos = ctx.input(1);
  const Tensor& sin = ctx.input(2);
  const Tensor* pos = Opt(ctx, 3);
  if (!IsAttnType(x.dtype()))
    return Unimplemented(n, "X of type ", DTypeName(x.dtype()), " is not implemented (float32, float16)");
  if (cos.dtype() != x.dtype() || sin.dtype() != x.dtype())
    return InvalidArgument(ctx, "cos_cache and sin_cache must be ", DTypeName(x.dtype()), " as X is");
  if (x.rank() != 3 && x.rank() != 4)
    return InvalidArgument(ctx, "X must be 3-D [batch, sequence, hidden] or 4-D [batch, heads, sequence, head_size], got ",
                           ShapeToString(x.shape()));
  const int64_t attr_heads = n.GetInt("num_heads", 0), attr_dim = n.GetInt("rotary_embedding_dim", 0);
  const bool four_d = x.rank() == 4;
  const int64_t B = x.dim(0), S = four_d ? x.dim(2) : x.dim(1);
  if (!four_d && attr_heads <= 0) return InvalidArgument(ctx, "3-D X needs the num_heads attribute");
  if (four_d && attr_heads > 0 && attr_heads != x.dim(1))
    return InvalidArgument(ctx, "num_heads ", attr_heads, " disagrees with X's ", x.dim(1), " heads");
  const int64_t heads = four_d ? x.dim(1) : attr_heads;
  if (!four_d && x.dim(2) % heads != 0)
    return InvalidArgument(ctx, "X's hidden size ", x.dim(2), " is not a multiple of num_heads ", heads);
  const int64_t head = four_d ? x.dim(3) : x.dim(2) / heads;
  const int64_t rot = attr_dim > 0 ? attr_dim : head;
  if (rot > head || rot % 2 != 0)
    return InvalidArgument(ctx, "rotary_embedding_dim ", rot, " must be even and at most head_size ", head);
  const int64_t half = rot / 2;
  if (cos.shape() != sin.shape()) return InvalidArgument(ctx, "cos_cache and sin_cache shapes differ");
  std::vector<int64_t> cos_row(static_cast<size_t>(B * S));
  if (pos != nullptr) {
    if (pos->dtype() != DType::kInt64) return InvalidArgument(ctx, "position_ids must be int64, got ", DTypeName(pos->dtype()));
    if (pos->rank() != 2 || pos->dim(0) != B || pos->dim(1) != S)
      return InvalidArgument(ctx, "position_ids ", ShapeToString(pos->shape()), " must be [batch ", B, ", sequence ", S, "]");
    if (cos.rank() != 2 || cos.dim(1) < half)
      return InvalidArgument(ctx, "with position_ids, cos_cache ", ShapeToString(cos.shape()),
                             " must be [positions, >= rotary_embedding_dim / 2 = ", half, "]");
    for (int64_t i = 0; i < B * S; ++i) {
      const int64_t p = pos->data<int64_t>()[i];
      if (p < 0 || p >= cos.dim(0))
        return InvalidArgument(ctx, "position ", p, " (batch ", i / std::max<int64_t>(S, 1), ", token ", i % std::max<int64_t>(S, 1),
                               ") is outside cos_cache's ", cos.dim(0), " positions");
      cos_row[i] = p;
    }
  } else {
    if (cos.rank() != 3 || cos.dim(0) != B || cos.dim(1) != S || cos.dim(2) < half)
      return InvalidArgument(ctx, "without position_ids, cos_cache ", ShapeToString(cos.shape()), " must be [batch ", B,
                             ", sequence ", S, ", >= rotary_embedding_dim / 2 = ", half, "]");
    for (int64_t i = 0; i < B * S; ++i) cos_row[i] = i;
  }
  Tensor& y = ctx.AllocateOutputUninitialized(0, x.dtype(), x.shape());
  if (x.num_elements() == 0) return absl::OkStatus();
  RotateHeads(ctx.thread_pool(), x, y, {B, S, heads, head, four_d}, cos, sin, half, n.GetInt("interleaved", 0) == 1,
              cos_row);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OpKernel>> MakeOnnxRotaryEmbedding(const KernelInit& init) {
  const Node& n = init.node();
  const int64_t interleaved = n.GetInt("interleaved", 0);
  if (interleaved != 0 && interleaved != 1)
    return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": interleaved must be 0 or 1, got ", interleaved));
  if (n.GetInt("rotary_embedding_dim", 0) < 0 || n.GetInt("num_heads", 0) < 0)
    return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": num_heads and rotary_embedding_dim must not be negative"));
  return MakeFnKernel(OnnxRotaryEmbedding)(init);
}

}  // namespace

// --- The reference ----------------------------------------------------------------------------

std::vector<Tensor> AttentionReference(const AttentionAttrs& a, const AttentionInputs& in) {
  const Tensor& q = *in.q;
  const Tensor& k = *in.k;
  const Tensor& v = *in.v;
  const bool three = q.rank() == 3;
  const int64_t B = q.dim(0);
  const int64_t Hq = three ? a.q_num_heads : q.dim(1), Hkv = three ? a.kv_num_heads : k.dim(1);
  const int64_t Sq = three ? q.dim(1) : q.dim(2), L = three ? k.dim(1) : k.dim(2);
  const int64_t D = three ? q.dim(2) / Hq : q.dim(3), Dv = three ? v.dim(2) / Hkv : v.dim(3);
  const int64_t P = in.past_key ? in.past_key->dim(2) : 0, T = P + L;
  // Element (b, h, s, d) of a BNSH-or-BSH tensor.
  auto at = [&](const Tensor& t, bool bsh, int64_t H, int64_t S, int64_t Dh, int64_t b, int64_t h, int64_t s, int64_t d) {
    return static_cast<double>(t.data<float>()[bsh ? ((b * S + s) * H + h) * Dh + d : ((b * H + h) * S + s) * Dh + d]);
  };
  auto key = [&](int64_t b, int64_t h, int64_t j, int64_t d) {
    return j < P ? at(*in.past_key, false, Hkv, P, D, b, h, j, d) : at(k, three, Hkv, L, D, b, h, j - P, d);
  };
  auto value = [&](int64_t b, int64_t h, int64_t j, int64_t d) {
    return j < P ? at(*in.past_value, false, Hkv, P, Dv, b, h, j, d) : at(v, three, Hkv, L, Dv, b, h, j - P, d);
  };
  const double scale = a.scale.has_value() ? *a.scale : 1.0 / std::sqrt(static_cast<double>(D));
  const double sq = std::sqrt(scale);  // the spec scales Q and K each by sqrt(scale)
  Tensor y = Tensor::Empty(DType::kFloat32, three ? Shape{B, Sq, Hq * Dv} : Shape{B, Hq, Sq, Dv});
  Tensor pk = Tensor::Empty(DType::kFloat32, {B, Hkv, T, D});
  Tensor pv = Tensor::Empty(DType::kFloat32, {B, Hkv, T, Dv});
  Tensor qk = Tensor::Empty(DType::kFloat32, {B, Hq, Sq, T});
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hkv; ++h) {
      for (int64_t j = 0; j < T; ++j) {
        for (int64_t d = 0; d < D; ++d) pk.data<float>()[((b * Hkv + h) * T + j) * D + d] = static_cast<float>(key(b, h, j, d));
        for (int64_t d = 0; d < Dv; ++d) pv.data<float>()[((b * Hkv + h) * T + j) * Dv + d] = static_cast<float>(value(b, h, j, d));
      }
    }
  }
  std::vector<int64_t> mst;
  if (in.attn_mask) mst = BroadcastStrides(in.attn_mask->shape(), {B, Hq, Sq, T});
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kh = h / (Hq / Hkv);
      for (int64_t i = 0; i < Sq; ++i) {
        std::vector<double> raw(T), capped(T), bias(T, 0.0), pr(T);
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += at(q, three, Hq, Sq, D, b, h, i, d) * sq * (key(b, kh, j, d) * sq);
          raw[j] = dot;
          capped[j] = a.softcap > 0 ? a.softcap * std::tanh(dot / a.softcap) : dot;
          if (in.attn_mask) {
            const int64_t o = b * mst[0] + h * mst[1] + i * mst[2] + j * mst[3];
            bias[j] = in.attn_mask->dtype() == DType::kBool ? (in.attn_mask->data<bool>()[o] ? 0.0 : -INFINITY)
                                                            : in.attn_mask->data<float>()[o];
          }
          if (a.is_causal && j > i + P) bias[j] = -INFINITY;
        }
        double bmax = -INFINITY, m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < T; ++j) bmax = std::max(bmax, bias[j]), m = std::max(m, capped[j] + bias[j]);
        for (int64_t j = 0; j < T; ++j) sum += pr[j] = bmax == -INFINITY ? 0.0 : std::exp(capped[j] + bias[j] - m);
        for (int64_t j = 0; j < T; ++j) {
          if (bmax != -INFINITY) pr[j] /= sum;
          const double o = a.qk_matmul_output_mode == 0   ? raw[j]
                           : a.qk_matmul_output_mode == 1 ? capped[j]
                           : a.qk_matmul_output_mode == 2 ? capped[j] + bias[j]
                                                          : pr[j];
          qk.data<float>()[((b * Hq + h) * Sq + i) * T + j] = static_cast<float>(o);
        }
        for (int64_t d = 0; d < Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < T; ++j) acc += pr[j] * value(b, kh, j, d);
          const int64_t yo = three ? ((b * Sq + i) * Hq + h) * Dv + d : ((b * Hq + h) * Sq + i) * Dv + d;
          y.data<float>()[yo] = static_cast<float>(acc);
        }
      }
    }
  }
  return {y, pk, pv, qk};
}

void RegisterOnnxAttentionOps(KernelRegistry& r) {
  AddVersions(r, "Attention", {23}, MakeAttention);
  AddVersions(r, "RotaryEmbedding", {23}, MakeOnnxRotaryEmbedding);
}

}  // namespace oneinfer
