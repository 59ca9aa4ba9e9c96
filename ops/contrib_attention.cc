// com.microsoft GroupQueryAttention and RotaryEmbedding with ONNX Runtime 1.30's CPU semantics
// (see ops/contrib_attention.h for the layouts and docs/contrib_ops.md for what is refused).
// float16 inputs are widened to float32 and every output is rounded once, except that rotated Q
// and K are rounded to float16 before the attention, as ONNX Runtime keeps them in the input type
// (so present_key holds exactly the keys the scores used).
#include "ops/contrib_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/half.h"
#include "base/thread_pool.h"
#include "ops/families.h"
#include "ops/float_elements.h"
#include "ops/gemm/sgemm.h"
#include "ops/kernel.h"
#include "ops/op_util.h"

namespace oneinfer {

namespace {

constexpr char kMs[] = "com.microsoft";

// ONNX Runtime's GroupQueryAttention input and output slots.
enum GqaIn : size_t {
  kQuery, kKey, kValue, kPastKey, kPastValue, kSeqlensK, kTotalSeqLen, kCos, kSin, kPositionIds,
  kAttnBias, kHeadSink, kKScale, kVScale, kQNormWeight, kKNormWeight
};

// The first key a query row attends: ONNX Runtime 1.30 keeps local_window_size keys ending at
// the row's own position (eff = keys visible causally).
int64_t WindowStart(int64_t eff, int64_t local_window_size) {
  return local_window_size > 0 && eff > local_window_size ? eff - local_window_size : 0;
}

// n contiguous elements of a float32 / float16 tensor from element `at`, as float32.
void LoadFloats(const Tensor& t, int64_t at, int64_t n, float* dst) {
  if (t.dtype() == DType::kFloat32) {
    std::memcpy(dst, t.data<float>() + at, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const uint16_t* s = t.data<uint16_t>() + at;
  for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(s[i]);
}

// Rotates the first 2 * half elements of x in place with one cos/sin row (interleaved pairs
// (2i, 2i+1), or halves (i, i + half)); the rest of the head stays as it is.
void Rotate(float* x, const float* cos, const float* sin, int64_t half, bool interleaved) {
  if (interleaved) {
    for (int64_t i = 0; i < half; ++i) {
      const float a = x[2 * i], b = x[2 * i + 1];
      x[2 * i] = a * cos[i] - b * sin[i];
      x[2 * i + 1] = b * cos[i] + a * sin[i];
    }
  } else {
    for (int64_t i = 0; i < half; ++i) {
      const float a = x[i], b = x[i + half];
      x[i] = a * cos[i] - b * sin[i];
      x[i + half] = b * cos[i] + a * sin[i];
    }
  }
}

// What the run's inputs say, once checked.
struct GqaGeom {
  int64_t B = 0, S = 0, H = 0, KVH = 0, D = 0;
  int64_t P = 0;            // past length (0 without past)
  int64_t total = 0;        // total_sequence_length
  int64_t present_len = 0;  // max(total, P)
  int64_t half_rot = 0;     // cos_cache's last dim (0 without caches)
  int64_t cos_rows = 0;
  bool packed = false, first_prompt = false;
  std::vector<int64_t> past_rows;    // per batch: rows kept from past (0 on the first prompt)
  std::vector<int64_t> valid;        // per batch: seqlens_k[b] + 1
  std::vector<int64_t> positions;    // B * S rotary positions (when rotating)
};

class GroupQueryAttentionKernel : public OpKernel {
 public:
  explicit GroupQueryAttentionKernel(const GqaAttrs& a) : a_(a) {}

  absl::Status Compute(OpContext& ctx) const override;

 private:
  absl::Status Check(OpContext& ctx, GqaGeom* g) const;
  GqaAttrs a_;
};

const Tensor* Opt(const OpContext& ctx, size_t i) {
  return ctx.num_inputs() > i && ctx.has_input(i) ? &ctx.input(i) : nullptr;
}

absl::Status GroupQueryAttentionKernel::Check(OpContext& ctx, GqaGeom* g) const {
  const Tensor& q = ctx.input(kQuery);
  const Tensor* k = Opt(ctx, kKey);
  const Tensor* v = Opt(ctx, kValue);
  const Tensor* pk = Opt(ctx, kPastKey);
  const Tensor* pv = Opt(ctx, kPastValue);
  const Tensor* cos = Opt(ctx, kCos);
  const Tensor* sin = Opt(ctx, kSin);
  const Tensor* pos = Opt(ctx, kPositionIds);
  const Tensor* bias = Opt(ctx, kAttnBias);
  const Tensor* sink = Opt(ctx, kHeadSink);
  if (q.dtype() != DType::kFloat32 && q.dtype() != DType::kFloat16)
    return InvalidArgument(ctx, "query must be float32 or float16, got ", DTypeName(q.dtype()));
  for (const Tensor* t : {k, v, pk, pv, cos, sin, bias, sink}) {
    if (t != nullptr && t->dtype() != q.dtype())
      return InvalidArgument(ctx, "key, value, past, cos/sin caches, attention_bias and head_sink must all be ",
                             DTypeName(q.dtype()), " as query is, got ", DTypeName(t->dtype()));
  }
  if (q.rank() != 3) return InvalidArgument(ctx, "query must be 3-D [batch, sequence, hidden], got ", ShapeToString(q.shape()));
  g->H = a_.num_heads;
  g->KVH = a_.kv_num_heads;
  g->B = q.dim(0);
  g->S = q.dim(1);
  g->packed = k == nullptr;
  if ((k == nullptr) != (v == nullptr)) return InvalidArgument(ctx, "key and value must be both present or both absent (packed QKV)");
  const int64_t heads_in_q = g->packed ? g->H + 2 * g->KVH : g->H;
  if (q.dim(2) % heads_in_q != 0)
    return InvalidArgument(ctx, "query hidden size ", q.dim(2), " is not a multiple of ", heads_in_q,
                           g->packed ? " (num_heads + 2 * kv_num_heads, packed QKV)" : " (num_heads)");
  g->D = q.dim(2) / heads_in_q;
  // ONNX Runtime's CPU kernel refuses other head sizes.
  if (g->D == 0 || g->D % 8 != 0) return InvalidArgument(ctx, "head_size ", g->D, " must be a positive multiple of 8");
  if (!g->packed) {
    const Shape want = {g->B, g->S, g->KVH * g->D};
    if (k->shape() != want || v->shape() != want)
      return InvalidArgument(ctx, "key ", ShapeToString(k->shape()), " and value ", ShapeToString(v->shape()),
                             " must be [batch, sequence, kv_num_heads * head_size] = ", ShapeToString(want));
  }
  if ((pk == nullptr) != (pv == nullptr)) return InvalidArgument(ctx, "past_key and past_value must be both present or both absent");
  if (pk != nullptr) {
    if (pk->rank() != 4 || pk->shape() != pv->shape() || pk->dim(0) != g->B || pk->dim(1) != g->KVH || pk->dim(3) != g->D)
      return InvalidArgument(ctx, "past_key ", ShapeToString(pk->shape()), " and past_value ", ShapeToString(pv->shape()),
                             " must both be [batch ", g->B, ", kv_num_heads ", g->KVH, ", past_length, head_size ", g->D, "]");
    g->P = pk->dim(2);
  }
  const Tensor& sk = ctx.input(kSeqlensK);
  const Tensor& ts = ctx.input(kTotalSeqLen);
  if (sk.dtype() != DType::kInt32 || sk.rank() != 1 || sk.dim(0) != g->B)
    return InvalidArgument(ctx, "seqlens_k must be int32 [batch = ", g->B, "], got ", DTypeName(sk.dtype()), " ",
                           ShapeToString(sk.shape()));
  if (ts.dtype() != DType::kInt32 || ts.num_elements() != 1 || ts.rank() > 1)
    return InvalidArgument(ctx, "total_sequence_length must be one int32, got ", DTypeName(ts.dtype()), " ",
                           ShapeToString(ts.shape()));
  g->total = ts.data<int32_t>()[0];
  if (g->total < 1) return InvalidArgument(ctx, "total_sequence_length ", g->total, " must be at least 1");
  g->present_len = std::max(g->total, g->P);
  if ((cos == nullptr) != (sin == nullptr)) return InvalidArgument(ctx, "cos_cache and sin_cache must be both present or both absent");
  if (a_.do_rotary && cos == nullptr) return InvalidArgument(ctx, "do_rotary = 1 needs cos_cache and sin_cache");
  if (cos != nullptr) {
    if (cos->rank() != 2 || cos->shape() != sin->shape())
      return InvalidArgument(ctx, "cos_cache ", ShapeToString(cos->shape()), " and sin_cache ", ShapeToString(sin->shape()),
                             " must both be [max_positions, rotary_dim / 2]");
    // ONNX Runtime's rule: a multiple of 8 and at most (head_size / 16) * 8 (head_size / 2).
    if (cos->dim(1) > (g->D / 16) * 8 || cos->dim(1) % 8 != 0 || cos->dim(1) == 0)
      return InvalidArgument(ctx, "cos_cache last dimension ", cos->dim(1), " must be a positive multiple of 8 and at most (head_size / 16) * 8 = ",
                             (g->D / 16) * 8);
    if (cos->dim(0) < g->total)
      return InvalidArgument(ctx, "cos_cache has ", cos->dim(0), " positions, fewer than total_sequence_length ", g->total);
    g->half_rot = cos->dim(1);
    g->cos_rows = cos->dim(0);
  }
  // A prompt longer than one token that is not the whole sequence continues a past (batch 1 only).
  const bool subsequent = g->S > 1 && g->S != g->total;
  if (subsequent && g->B != 1)
    return InvalidArgument(ctx, "batch_size must be 1 when sequence_length ", g->S, " > 1 differs from total_sequence_length ", g->total);
  g->first_prompt = !subsequent && g->S == g->total;
  if (!subsequent && !g->first_prompt && g->S != 1)
    return InvalidArgument(ctx, "sequence_length must be 1 when it is not the prompt");
  g->past_rows.assign(g->B, 0);
  g->valid.assign(g->B, 0);
  for (int64_t b = 0; b < g->B; ++b) {
    const int64_t s = sk.data<int32_t>()[b];
    if (s < 0 || s >= g->present_len)
      return InvalidArgument(ctx, "seqlens_k[", b, "] = ", s, " is out of range [0, ", g->present_len, ")");
    g->valid[b] = s + 1;
    if (!g->first_prompt) {
      if (s + 1 < g->S) return InvalidArgument(ctx, "seqlens_k[", b, "] = ", s, " is too small for sequence_length ", g->S);
      g->past_rows[b] = s + 1 - g->S;
      if (g->past_rows[b] > g->P)
        return InvalidArgument(ctx, "seqlens_k[", b, "] = ", s, " needs ", g->past_rows[b], " past rows, past_key has ", g->P);
    }
  }
  if (pos != nullptr) {
    if (pos->dtype() != DType::kInt64 || pos->rank() != 2 || pos->dim(0) != g->B || pos->dim(1) < g->S)
      return InvalidArgument(ctx, "position_ids must be int64 [batch ", g->B, ", >= sequence ", g->S, "], got ",
                             DTypeName(pos->dtype()), " ", ShapeToString(pos->shape()));
  }
  if (bias != nullptr) {
    if (bias->rank() != 4 || (bias->dim(0) != g->B && bias->dim(0) != 1) || (bias->dim(1) != g->H && bias->dim(1) != 1) ||
        bias->dim(2) != g->S || bias->dim(3) != g->total)
      return InvalidArgument(ctx, "attention_bias ", ShapeToString(bias->shape()), " must be [batch or 1, num_heads or 1, ", g->S,
                             ", total_sequence_length ", g->total, "]");
  }
  if (sink != nullptr) {
    if (a_.smooth_softmax) return InvalidArgument(ctx, "head_sink must not be given with smooth_softmax = 1");
    if (sink->rank() != 1 || sink->dim(0) != g->H)
      return InvalidArgument(ctx, "head_sink must be [num_heads = ", g->H, "], got ", ShapeToString(sink->shape()));
  }
  if (a_.do_rotary) {
    // The first prompt counts from position_ids[0] (ONNX Runtime reads only that element then),
    // later steps from each row's own position id or from its past length.
    g->positions.resize(g->B * g->S);
    for (int64_t b = 0; b < g->B; ++b) {
      for (int64_t s = 0; s < g->S; ++s) {
        int64_t p;
        if (g->first_prompt) p = (pos != nullptr ? pos->data<int64_t>()[0] : 0) + s;
        else p = pos != nullptr ? pos->data<int64_t>()[b * g->S + s] : g->past_rows[b] + s;
        if (p < 0 || p >= g->cos_rows)
          return InvalidArgument(ctx, "rotary position ", p, " (batch ", b, ", token ", s, ") is outside cos_cache's ",
                                 g->cos_rows, " positions");
        g->positions[b * g->S + s] = p;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status GroupQueryAttentionKernel::Compute(OpContext& ctx) const {
  GqaGeom g;
  if (auto st = Check(ctx, &g); !st.ok()) return st;
  const Tensor& q = ctx.input(kQuery);
  const Tensor* k = Opt(ctx, kKey);
  const Tensor* v = Opt(ctx, kValue);
  const Tensor* pk = Opt(ctx, kPastKey);
  const Tensor* pv = Opt(ctx, kPastValue);
  const Tensor* bias = Opt(ctx, kAttnBias);
  const Tensor* sink = Opt(ctx, kHeadSink);
  const bool f16 = q.dtype() == DType::kFloat16;
  const int64_t B = g.B, S = g.S, H = g.H, KVH = g.KVH, D = g.D, L = g.present_len;
  const int64_t group = H / KVH;
  const int64_t q_width = q.dim(2);  // one token's row of query (all heads, packed K/V included)

  Tensor& out = ctx.AllocateOutputUninitialized(0, q.dtype(), {B, S, H * D});
  const Shape present_shape = {B, KVH, L, D};
  // A donated float32 past with room for the new rows (ONNX Runtime's past_present_share_buffer
  // form, L == P) is appended to in place and becomes the present: no copy of the cache. Its rows
  // past the valid ones are left as they are (the copy below zero-fills them; no query reads them).
  auto present = [&](size_t out, size_t past, bool* in_place) -> Tensor* {
    *in_place = false;
    if (ctx.num_outputs() <= out || !ctx.has_output(out)) return nullptr;
    if (!f16 && g.P == L) {
      if (Tensor* t = ctx.ReuseInputAsOutput(past, out, q.dtype(), present_shape)) {
        *in_place = true;
        return t;
      }
    }
    return &ctx.AllocateOutputUninitialized(out, q.dtype(), present_shape);
  };
  bool k_in_place = false, v_in_place = false;
  Tensor* present_k = present(1, kPastKey, &k_in_place);
  Tensor* present_v = present(2, kPastValue, &v_in_place);
  // Keys and values the scores read, as float32: the present outputs themselves when float32,
  // else scratch that is rounded into them once.
  Tensor k_scratch, v_scratch;
  float* kc;
  float* vc;
  if (!f16 && present_k != nullptr) kc = present_k->data<float>();
  else kc = (k_scratch = ctx.AllocateTemp(DType::kFloat32, present_shape, false)).data<float>();
  if (!f16 && present_v != nullptr) vc = present_v->data<float>();
  else vc = (v_scratch = ctx.AllocateTemp(DType::kFloat32, present_shape, false)).data<float>();

  // The cos/sin rows of the positions this run rotates (B * S rows of half_rot each), as float32:
  // only these rows, whatever the cache's length (genai writes caches of the full context).
  std::vector<float> cosf, sinf;
  if (a_.do_rotary) {
    cosf.resize(static_cast<size_t>(B * S * g.half_rot));
    sinf.resize(cosf.size());
    for (int64_t r = 0; r < B * S; ++r) {
      LoadFloats(ctx.input(kCos), g.positions[r] * g.half_rot, g.half_rot, cosf.data() + r * g.half_rot);
      LoadFloats(ctx.input(kSin), g.positions[r] * g.half_rot, g.half_rot, sinf.data() + r * g.half_rot);
    }
  }
  // Rotates one head row at token (b, s); float16 rounds the result as ONNX Runtime stores it.
  auto rotate = [&](float* x, int64_t b, int64_t s) {
    if (!a_.do_rotary) return;
    const int64_t r = b * S + s;
    Rotate(x, cosf.data() + r * g.half_rot, sinf.data() + r * g.half_rot, g.half_rot, a_.rotary_interleaved);
    if (f16)
      for (int64_t d = 0; d < 2 * g.half_rot; ++d) x[d] = F16ToF32(F32ToF16(x[d]));
  };

  // Present K/V, one (batch, kv head) slice per task: past rows once, the new rows, zeros after.
  ParallelFor(ctx.thread_pool(), B * KVH, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t b = u / KVH, kh = u % KVH, keep = g.past_rows[b];
      float* kd = kc + u * L * D;
      float* vd = vc + u * L * D;
      if (keep > 0 && !k_in_place) LoadFloats(*pk, u * g.P * D, keep * D, kd);
      if (keep > 0 && !v_in_place) LoadFloats(*pv, u * g.P * D, keep * D, vd);
      for (int64_t s = 0; s < S; ++s) {
        float* kr = kd + (keep + s) * D;
        float* vr = vd + (keep + s) * D;
        if (g.packed) {
          const int64_t row = (b * S + s) * q_width;
          LoadFloats(q, row + (H + kh) * D, D, kr);
          LoadFloats(q, row + (H + KVH + kh) * D, D, vr);
        } else {
          LoadFloats(*k, ((b * S + s) * KVH + kh) * D, D, kr);
          LoadFloats(*v, ((b * S + s) * KVH + kh) * D, D, vr);
        }
        rotate(kr, b, s);
      }
      const int64_t used = (keep + S) * D;
      if (!k_in_place) std::fill(kd + used, kd + L * D, 0.f);
      if (!v_in_place) std::fill(vd + used, vd + L * D, 0.f);
    }
  });
  if (f16) {
    for (const auto& kv : {std::pair<const float*, Tensor*>{kc, present_k}, {vc, present_v}}) {
      const float* src = kv.first;  // a plain variable: clang 15 cannot capture a structured binding
      Tensor* dst = kv.second;
      if (dst == nullptr) continue;
      uint16_t* d = dst->data<uint16_t>();
      ParallelFor(ctx.thread_pool(), dst->num_elements(), 4096, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) d[i] = F32ToF16(src[i]);
      });
    }
  }

  const float alpha = a_.scale == 0.f ? 1.f / std::sqrt(static_cast<float>(D)) : a_.scale;
  // Attention, one (batch, kv head) per task: the query rows of its `group` heads and S tokens
  // as one matrix, scores = alpha Q K^T and out = softmax(scores) V as two GEMMs over the keys
  // the rows see, masked per row (causal, window) before the softmax.
  const bool smooth = a_.smooth_softmax || sink != nullptr;
  ParallelFor(ctx.thread_pool(), B * KVH, 1, [&](int64_t u0, int64_t u1) {
    std::vector<float> qm, scores, om, brow;
    if (bias != nullptr) brow.resize(g.total);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t b = u / KVH, kh = u % KVH;
      const float* kd = kc + u * L * D;
      const float* vd = vc + u * L * D;
      const int64_t causal_past = g.first_prompt ? 0 : g.past_rows[b];
      const int64_t rows = group * S;
      // Row r = (head kh * group + r / S, token r % S); the keys row r sees: [start(r), eff(r)).
      auto eff_of = [&](int64_t s) { return std::min(causal_past + s + 1, g.valid[b]); };
      int64_t width = 0;
      for (int64_t s = 0; s < S; ++s) width = std::max(width, eff_of(s));
      qm.resize(static_cast<size_t>(rows * D));
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t h = kh * group + r / S, s = r % S;
        LoadFloats(q, (b * S + s) * q_width + h * D, D, qm.data() + r * D);
        rotate(qm.data() + r * D, b, s);
      }
      om.assign(static_cast<size_t>(rows * D), 0.f);
      if (width > 0) {
        scores.resize(static_cast<size_t>(rows * width));
        Sgemm(false, true, rows, width, D, alpha, qm.data(), D, kd, D, 0.f, scores.data(), width, nullptr);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t h = kh * group + r / S, s = r % S;
          const int64_t eff = eff_of(s), start = WindowStart(eff, a_.local_window_size);
          const float sink_v = sink != nullptr ? FloatAt(*sink, h) : 0.f;
          float* row = scores.data() + r * width;
          if (bias != nullptr) {
            const int64_t bb = bias->dim(0) == 1 ? 0 : b, bh = bias->dim(1) == 1 ? 0 : h;
            LoadFloats(*bias, ((bb * bias->dim(1) + bh) * S + s) * g.total, g.total, brow.data());
          }
          float mx = smooth ? sink_v : -std::numeric_limits<float>::infinity();
          for (int64_t j = start; j < eff; ++j) {
            float x = row[j];
            if (a_.softcap > 0.f) x = a_.softcap * std::tanh(x / a_.softcap);
            if (bias != nullptr) x += brow[j];
            row[j] = x;
            mx = std::max(mx, x);
          }
          float sum = smooth ? std::exp(sink_v - mx) : 0.f;
          for (int64_t j = start; j < eff; ++j) sum += (row[j] = std::exp(row[j] - mx));
          const float inv = 1.f / sum;
          for (int64_t j = 0; j < width; ++j) row[j] = j >= start && j < eff ? row[j] * inv : 0.f;
        }
        Sgemm(false, false, rows, D, width, 1.f, scores.data(), width, vd, D, 0.f, om.data(), D, nullptr);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t h = kh * group + r / S, s = r % S;
        const int64_t o = (b * S + s) * H * D + h * D;
        const float* src = om.data() + r * D;
        if (f16) {
          uint16_t* od = out.data<uint16_t>() + o;
          for (int64_t d = 0; d < D; ++d) od[d] = F32ToF16(src[d]);
        } else {
          std::memcpy(out.data<float>() + o, src, static_cast<size_t>(D) * sizeof(float));
        }
      }
    }
  });
  return absl::OkStatus();
}

int64_t DeclaredDim(const KernelInit& init, size_t i, size_t axis) {
  const TypeInfo* t = init.InputType(i);
  if (t == nullptr || !t->shape || t->shape->size() <= axis || !(*t->shape)[axis].is_fixed()) return -1;
  return (*t->shape)[axis].value;
}

absl::StatusOr<std::unique_ptr<OpKernel>> MakeGroupQueryAttention(const KernelInit& init) {
  const Node& n = init.node();
  auto bad = [&](auto... args) { return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": ", args...)); };
  auto refuse = [&](auto... args) { return Unimplemented(n, args...); };
  GqaAttrs a;
  a.num_heads = n.GetInt("num_heads", 0);
  a.kv_num_heads = n.GetInt("kv_num_heads", 0);
  if (a.num_heads <= 0 || a.kv_num_heads <= 0)
    return bad("num_heads (", a.num_heads, ") and kv_num_heads (", a.kv_num_heads, ") must be positive");
  if (a.num_heads % a.kv_num_heads != 0)
    return bad("num_heads ", a.num_heads, " is not a multiple of kv_num_heads ", a.kv_num_heads);
  a.scale = n.GetFloat("scale", 0.f);
  a.softcap = n.GetFloat("softcap", 0.f);
  if (!(a.softcap >= 0.f)) return bad("softcap ", a.softcap, " must be >= 0 (0: none)");
  a.local_window_size = n.GetInt("local_window_size", -1);
  if (a.local_window_size == 0 || a.local_window_size < -1)
    return bad("local_window_size ", a.local_window_size, " must be -1 (none) or positive");
  const int64_t do_rotary = n.GetInt("do_rotary", 0), interleaved = n.GetInt("rotary_interleaved", 0);
  if ((do_rotary != 0 && do_rotary != 1) || (interleaved != 0 && interleaved != 1))
    return bad("do_rotary and rotary_interleaved must be 0 or 1");
  a.do_rotary = do_rotary == 1;
  a.rotary_interleaved = interleaved == 1;
  a.smooth_softmax = n.GetInt("smooth_softmax", -1) == 1;
  if (n.GetInt("causal", 1) != 1) return refuse("causal = ", n.GetInt("causal", 1), " (bidirectional attention) is not implemented");
  if (n.GetInt("sliding_window_cache", 0) != 0) return refuse("sliding_window_cache = 1 (a window-sized KV cache) is not implemented");
  if (n.GetInt("qk_output", 0) != 0) return refuse("qk_output = ", n.GetInt("qk_output", 0), " is not implemented");
  if (n.outputs.size() > 3 && !n.outputs[3].empty()) return refuse("output_qk is not implemented");
  if (n.GetString("k_quant_type", "NONE") != "NONE" || n.GetString("v_quant_type", "NONE") != "NONE" ||
      (n.HasAttr("kv_cache_bit_width") && n.GetInt("kv_cache_bit_width", 0) != 0))
    return refuse("a quantised KV cache (k_quant_type, v_quant_type, kv_cache_bit_width) is not implemented");
  if (n.HasInput(kKScale) || n.HasInput(kVScale)) return refuse("k_scale / v_scale (a quantised KV cache) are not implemented");
  if (n.HasInput(kQNormWeight) || n.HasInput(kKNormWeight))
    return refuse("q_norm_weight / k_norm_weight are not implemented (ONNX Runtime's CPU kernel refuses them too)");
  if (a.do_rotary && (!n.HasInput(kCos) || !n.HasInput(kSin))) return bad("do_rotary = 1 needs cos_cache and sin_cache");
  // Shapes the graph declares are checked now; the same rules run on every Run.
  const bool packed = !n.HasInput(kKey);
  const int64_t qh = DeclaredDim(init, kQuery, 2), heads_in_q = packed ? a.num_heads + 2 * a.kv_num_heads : a.num_heads;
  int64_t head = -1;
  if (qh >= 0) {
    if (qh % heads_in_q != 0)
      return bad("query hidden size ", qh, " is not a multiple of ", heads_in_q, packed ? " (num_heads + 2 * kv_num_heads)" : " (num_heads)");
    head = qh / heads_in_q;
  }
  if (!packed) {
    for (size_t i : {size_t{kKey}, size_t{kValue}}) {
      const int64_t kh = DeclaredDim(init, i, 2);
      if (kh < 0) continue;
      if (kh % a.kv_num_heads != 0) return bad(i == kKey ? "key" : "value", " hidden size ", kh, " is not a multiple of kv_num_heads ", a.kv_num_heads);
      if (head >= 0 && kh != head * a.kv_num_heads)
        return bad(i == kKey ? "key" : "value", " hidden size ", kh, " is not kv_num_heads * head_size = ", a.kv_num_heads, " * ", head);
    }
  }
  const int64_t half = n.HasInput(kCos) ? DeclaredDim(init, kCos, 1) : -1;
  if (head >= 0 && half >= 0 && (half > (head / 16) * 8 || half % 8 != 0 || half == 0))
    return bad("cos_cache last dimension ", half, " must be a positive multiple of 8 and at most (head_size / 16) * 8 = ", (head / 16) * 8);
  return std::unique_ptr<OpKernel>(new GroupQueryAttentionKernel(a));
}

// --- RotaryEmbedding ------------------------------------------------------------------------

absl::Status RotaryEmbedding(OpContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& x = ctx.input(0);
  const Tensor& pos = ctx.input(1);
  const Tensor& cos = ctx.input(2);
  const Tensor& sin = ctx.input(3);
  if (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat16)
    return InvalidArgument(ctx, "input must be float32 or float16, got ", DTypeName(x.dtype()));
  if (cos.dtype() != x.dtype() || sin.dtype() != x.dtype())
    return InvalidArgument(ctx, "cos_cache and sin_cache must be ", DTypeName(x.dtype()), " as the input is");
  if (pos.dtype() != DType::kInt64) return InvalidArgument(ctx, "position_ids must be int64, got ", DTypeName(pos.dtype()));
  if (x.rank() != 3 && x.rank() != 4)
    return InvalidArgument(ctx, "input must be 3-D [batch, sequence, hidden] or 4-D [batch, heads, sequence, head_size], got ",
                           ShapeToString(x.shape()));
  if (cos.rank() != 2 || cos.shape() != sin.shape())
    return InvalidArgument(ctx, "cos_cache ", ShapeToString(cos.shape()), " and sin_cache ", ShapeToString(sin.shape()),
                           " must both be [max_positions, rotary_dim / 2]");
  const int64_t attr_heads = n.GetInt("num_heads", 0), attr_dim = n.GetInt("rotary_embedding_dim", 0);
  const bool interleaved = n.GetInt("interleaved", 0) == 1;
  const bool four_d = x.rank() == 4;
  const int64_t B = x.dim(0), S = four_d ? x.dim(2) : x.dim(1);
  const int64_t hidden = four_d ? x.dim(1) * x.dim(3) : x.dim(2);
  // head_size: from num_heads when rotary_embedding_dim is given, else the caches' full width.
  const int64_t head = four_d ? x.dim(3) : attr_dim > 0 ? (attr_heads > 0 ? hidden / attr_heads : 0) : 2 * cos.dim(1);
  const int64_t heads = four_d ? x.dim(1) : head > 0 ? hidden / head : 0;
  if (head <= 0 || heads * head != hidden || (attr_heads > 0 && attr_heads != heads))
    return InvalidArgument(ctx, "input ", ShapeToString(x.shape()), " does not split into num_heads ", attr_heads,
                           " heads of head_size ", head, " (caches [", cos.dim(0), ", ", cos.dim(1), "])");
  const int64_t rot = attr_dim > 0 ? attr_dim : head;
  if (rot > head || rot % 2 != 0)
    return InvalidArgument(ctx, "rotary_embedding_dim ", rot, " must be even and at most head_size ", head);
  if (cos.dim(1) != rot / 2)
    return InvalidArgument(ctx, "cos_cache last dimension ", cos.dim(1), " must be rotary_embedding_dim / 2 = ", rot / 2);
  const bool offset_form = pos.num_elements() == 1 && pos.rank() <= 1;
  if (!offset_form && (pos.rank() != 2 || pos.dim(0) != B || pos.dim(1) != S))
    return InvalidArgument(ctx, "position_ids must be [1] (an offset) or [batch ", B, ", sequence ", S, "], got ",
                           ShapeToString(pos.shape()));
  const int64_t M = cos.dim(0), half = rot / 2;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      const int64_t p = offset_form ? pos.data<int64_t>()[0] + s : pos.data<int64_t>()[b * S + s];
      if (p < 0 || p >= M)
        return InvalidArgument(ctx, "position ", p, " (batch ", b, ", token ", s, ") is outside cos_cache's ", M, " positions");
    }
  }
  Tensor& y = ctx.AllocateOutputUninitialized(0, x.dtype(), x.shape());
  std::vector<int64_t> cos_row(static_cast<size_t>(B * S));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) cos_row[b * S + s] = offset_form ? pos.data<int64_t>()[0] + s : pos.data<int64_t>()[b * S + s];
  }
  RotateHeads(ctx.thread_pool(), x, y, {B, S, heads, head, four_d}, cos, sin, half, interleaved, cos_row);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OpKernel>> MakeRotaryEmbedding(const KernelInit& init) {
  const Node& n = init.node();
  if (n.GetInt("is_packed_batching", 0) != 0) return Unimplemented(n, "is_packed_batching = 1 is not implemented");
  if (n.GetFloat("scale", 1.f) != 1.f) return Unimplemented(n, "scale ", n.GetFloat("scale", 1.f), " is not implemented (1 only)");
  const int64_t interleaved = n.GetInt("interleaved", 0);
  if (interleaved != 0 && interleaved != 1) return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": interleaved must be 0 or 1"));
  if (n.GetInt("rotary_embedding_dim", 0) > 0 && n.GetInt("num_heads", 0) <= 0)
    return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": num_heads must be given with rotary_embedding_dim"));
  if (n.GetInt("rotary_embedding_dim", 0) < 0 || n.GetInt("num_heads", 0) < 0)
    return absl::InvalidArgumentError(absl::StrCat(n.Describe(), ": num_heads and rotary_embedding_dim must not be negative"));
  return MakeFnKernel(RotaryEmbedding)(init);
}

}  // namespace

void RotateHeads(ThreadPool* pool, const Tensor& x, Tensor& y, const HeadLayout& l, const Tensor& cos,
                 const Tensor& sin, int64_t half, bool interleaved, const std::vector<int64_t>& cos_row) {
  const int64_t width = cos.dim(-1);
  std::vector<float> cosf(cos.num_elements()), sinf(sin.num_elements());
  LoadFloats(cos, 0, cos.num_elements(), cosf.data());
  LoadFloats(sin, 0, sin.num_elements(), sinf.data());
  // One head row per item: strides of [B, S, N, D] or [B, N, S, D].
  const int64_t S = l.S, heads = l.heads, head = l.head;
  const int64_t seq_stride = l.four_d ? head : heads * head, head_stride = l.four_d ? S * head : head;
  ParallelFor(pool, l.B * S * heads, 64, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(head);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / (S * heads), s = r / heads % S, h = r % heads;
      const int64_t at = b * S * heads * head + s * seq_stride + h * head_stride;
      const int64_t c = cos_row[b * S + s] * width;
      LoadFloats(x, at, head, row.data());
      Rotate(row.data(), cosf.data() + c, sinf.data() + c, half, interleaved);
      for (int64_t d = 0; d < head; ++d) SetFloatAt(y, at + d, row[d]);
    }
  });
}

// --- The reference ----------------------------------------------------------------------------

std::vector<Tensor> GqaReference(const GqaAttrs& a, const GqaInputs& in) {
  const Tensor& q = *in.query;
  const int64_t B = q.dim(0), S = q.dim(1), H = a.num_heads, KVH = a.kv_num_heads;
  const bool packed = in.key == nullptr;
  const int64_t D = q.dim(2) / (packed ? H + 2 * KVH : H);
  const int64_t P = in.past_key != nullptr ? in.past_key->dim(2) : 0;
  const int64_t total = in.total_sequence_length->data<int32_t>()[0];
  const int64_t L = std::max(total, P);
  const bool first = S == total;
  const float* qd = q.data<float>();
  // Element d of the new key / value row of token s in kv head kh.
  auto new_k = [&](int64_t b, int64_t s, int64_t kh, int64_t d) {
    return packed ? qd[(b * S + s) * q.dim(2) + (H + kh) * D + d] : in.key->data<float>()[((b * S + s) * KVH + kh) * D + d];
  };
  auto new_v = [&](int64_t b, int64_t s, int64_t kh, int64_t d) {
    return packed ? qd[(b * S + s) * q.dim(2) + (H + KVH + kh) * D + d] : in.value->data<float>()[((b * S + s) * KVH + kh) * D + d];
  };
  auto past_rows = [&](int64_t b) -> int64_t { return first ? 0 : in.seqlens_k->data<int32_t>()[b] + 1 - S; };
  auto position = [&](int64_t b, int64_t s) -> int64_t {
    if (first) return (in.position_ids ? in.position_ids->data<int64_t>()[0] : 0) + s;
    return in.position_ids ? in.position_ids->data<int64_t>()[b * S + s] : past_rows(b) + s;
  };
  // A head row rotated in double (or returned as it is).
  auto rotated = [&](std::vector<double> x, int64_t b, int64_t s) {
    if (!a.do_rotary) return x;
    const int64_t half = in.cos_cache->dim(1), p = position(b, s);
    std::vector<double> y = x;
    for (int64_t i = 0; i < half; ++i) {
      const double c = in.cos_cache->data<float>()[p * half + i], sn = in.sin_cache->data<float>()[p * half + i];
      const int64_t i0 = a.rotary_interleaved ? 2 * i : i, i1 = a.rotary_interleaved ? 2 * i + 1 : i + half;
      y[i0] = x[i0] * c - x[i1] * sn;
      y[i1] = x[i1] * c + x[i0] * sn;
    }
    return y;
  };
  Tensor out = Tensor::Empty(DType::kFloat32, {B, S, H * D});
  Tensor pk = Tensor::Empty(DType::kFloat32, {B, KVH, L, D});
  Tensor pv = Tensor::Empty(DType::kFloat32, {B, KVH, L, D});
  std::fill(pk.data<float>(), pk.data<float>() + pk.num_elements(), 0.f);
  std::fill(pv.data<float>(), pv.data<float>() + pv.num_elements(), 0.f);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t kh = 0; kh < KVH; ++kh) {
      float* kd = pk.data<float>() + (b * KVH + kh) * L * D;
      float* vd = pv.data<float>() + (b * KVH + kh) * L * D;
      const int64_t keep = past_rows(b);
      for (int64_t j = 0; j < keep; ++j) {
        for (int64_t d = 0; d < D; ++d) {
          kd[j * D + d] = in.past_key->data<float>()[((b * KVH + kh) * P + j) * D + d];
          vd[j * D + d] = in.past_value->data<float>()[((b * KVH + kh) * P + j) * D + d];
        }
      }
      for (int64_t s = 0; s < S; ++s) {
        std::vector<double> kr(D);
        for (int64_t d = 0; d < D; ++d) kr[d] = new_k(b, s, kh, d);
        kr = rotated(kr, b, s);
        for (int64_t d = 0; d < D; ++d) {
          kd[(keep + s) * D + d] = static_cast<float>(kr[d]);
          vd[(keep + s) * D + d] = new_v(b, s, kh, d);
        }
      }
    }
  }
  const double alpha = a.scale == 0.f ? 1.0 / std::sqrt(static_cast<double>(D)) : a.scale;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t valid = in.seqlens_k->data<int32_t>()[b] + 1;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / (H / KVH);
      const float* kd = pk.data<float>() + (b * KVH + kh) * L * D;
      const float* vd = pv.data<float>() + (b * KVH + kh) * L * D;
      for (int64_t s = 0; s < S; ++s) {
        std::vector<double> qr(D);
        for (int64_t d = 0; d < D; ++d) qr[d] = qd[(b * S + s) * q.dim(2) + h * D + d];
        qr = rotated(qr, b, s);
        const int64_t eff = std::min(past_rows(b) + s + 1, valid);
        const int64_t start = a.local_window_size > 0 && eff > a.local_window_size ? eff - a.local_window_size : 0;
        std::vector<double> x;
        for (int64_t j = start; j < eff; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += qr[d] * kd[j * D + d];
          double v = dot * alpha;
          if (a.softcap > 0.f) v = a.softcap * std::tanh(v / a.softcap);
          if (in.attention_bias != nullptr) {
            const Tensor& ab = *in.attention_bias;
            const int64_t bb = ab.dim(0) == 1 ? 0 : b, bh = ab.dim(1) == 1 ? 0 : h;
            v += ab.data<float>()[((bb * ab.dim(1) + bh) * S + s) * total + j];
          }
          x.push_back(v);
        }
        const bool smooth = a.smooth_softmax || in.head_sink != nullptr;
        const double sink = in.head_sink != nullptr ? in.head_sink->data<float>()[h] : 0.0;
        double mx = smooth ? sink : -INFINITY;
        for (double v : x) mx = std::max(mx, v);
        double sum = smooth ? std::exp(sink - mx) : 0.0;
        for (double& v : x) sum += (v = std::exp(v - mx));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = start; j < eff; ++j) acc += x[j - start] / sum * vd[j * D + d];
          out.data<float>()[(b * S + s) * H * D + h * D + d] = static_cast<float>(acc);
        }
      }
    }
  }
  return {out, pk, pv};
}

void RegisterContribAttentionOps(KernelRegistry& r) {
  r.Add(kMs, "GroupQueryAttention", 1, 1, MakeGroupQueryAttention);
  r.Add(kMs, "RotaryEmbedding", 1, 1, MakeRotaryEmbedding);
}

}  // namespace oneinfer
