// com.microsoft GroupQueryAttention and RotaryEmbedding (ONNX Runtime 1.30's contrib ops, as the
// onnxruntime-genai builder writes them), CPU kernels in ops/contrib_attention.cc.
//
// GroupQueryAttention: query [B, S, H*D] (or packed QKV [B, S, (H + 2*KVH)*D] with key/value
// absent), key/value [B, S, KVH*D], past_key/past_value [B, KVH, P, D] (BNSH), seqlens_k [B]
// (valid total length - 1 per batch row), total_sequence_length (scalar). present_key/value are
// [B, KVH, max(total, P), D]: past rows [0, past_b) then the S new rows, zeros after, where
// past_b = 0 on the first prompt (S == total_sequence_length) and seqlens_k[b] + 1 - S otherwise.
// Query row s of batch b attends keys [start, min(causal_past + s + 1, seqlens_k[b] + 1)), a
// softmax (or its smooth / head-sink form) over scale * q.k (softcapped, plus attention_bias).
//
// GqaReference is the plain oracle the kernel's tests compare with: float32 inputs only, loops
// over every element, dot products and softmax in double, rotary in double from the float
// caches. It assumes inputs the kernel's checks accept.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "base/thread_pool.h"
#include "oneinfer/tensor.h"

namespace oneinfer {

struct GqaAttrs {
  int64_t num_heads = 0, kv_num_heads = 0;
  float scale = 0.f;    // 0: 1 / sqrt(head_size)
  float softcap = 0.f;  // 0: none
  int64_t local_window_size = -1;
  bool do_rotary = false, rotary_interleaved = false, smooth_softmax = false;
};

// Optional inputs are null. Returns {output, present_key, present_value} as float32.
struct GqaInputs {
  const Tensor* query = nullptr;
  const Tensor* key = nullptr;
  const Tensor* value = nullptr;
  const Tensor* past_key = nullptr;
  const Tensor* past_value = nullptr;
  const Tensor* seqlens_k = nullptr;
  const Tensor* total_sequence_length = nullptr;
  const Tensor* cos_cache = nullptr;
  const Tensor* sin_cache = nullptr;
  const Tensor* position_ids = nullptr;
  const Tensor* attention_bias = nullptr;
  const Tensor* head_sink = nullptr;
};
std::vector<Tensor> GqaReference(const GqaAttrs& a, const GqaInputs& in);

// The rotary step shared by com.microsoft RotaryEmbedding and ai.onnx RotaryEmbedding-23.
// x (float32 or float16) is [B, S, heads * head] or, four_d, [B, heads, S, head]; y has its shape
// and type. Head row (b, s, h) is rotated with row cos_row[b * S + s] of cos / sin (float32 or
// float16 like x, rows of cos.dim(-1) values, the first `half` used): its first 2 * half elements
// as halves (i, i + half) or interleaved pairs (2i, 2i + 1), the rest copied. Widened to float32
// and rounded once. The caller has checked every shape and row index.
struct HeadLayout {
  int64_t B = 0, S = 0, heads = 0, head = 0;
  bool four_d = false;
};
void RotateHeads(ThreadPool* pool, const Tensor& x, Tensor& y, const HeadLayout& layout, const Tensor& cos,
                 const Tensor& sin, int64_t half, bool interleaved, const std::vector<int64_t>& cos_row);

}  // namespace oneinfer
