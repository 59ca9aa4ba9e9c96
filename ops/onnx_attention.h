// ai.onnx Attention-23 (ops/onnx_attention.cc), with the ONNX specification's semantics as its
// reference implementation (onnx/reference/ops/op_attention.py, errata included) states them:
// Q [B, Hq, Sq, D] or [B, Sq, Hq*D], K [B, Hkv, L, D] or [B, L, Hkv*D], V likewise with Dv;
// present_key/value = past (BNSH, P rows) then the new rows, T = P + L. Scores are
// scale * q.k (scale absent: 1/sqrt(D)), softcapped (softcap > 0), then attn_mask (bool: false
// masks; float: added) and is_causal (key j visible to query i iff j <= i + P) are added; a
// row with every key masked gives zeros. qk_matmul_output_mode 0..3: the raw scores, after
// softcap, after the mask, after softmax. Query head h reads key/value head h / (Hq / Hkv).
//
// AttentionReference is the plain oracle the kernel's tests compare with: float32 inputs only,
// every element in double, Q and K each multiplied by sqrt(scale) as the spec's function body
// does. It assumes inputs the kernel's checks accept.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "oneinfer/tensor.h"

namespace oneinfer {

struct AttentionAttrs {
  int64_t q_num_heads = 0, kv_num_heads = 0;  // 0: absent (4-D inputs)
  std::optional<float> scale;
  float softcap = 0.f;
  bool is_causal = false;
  int64_t qk_matmul_output_mode = 0;
};

struct AttentionInputs {
  const Tensor* q = nullptr;
  const Tensor* k = nullptr;
  const Tensor* v = nullptr;
  const Tensor* attn_mask = nullptr;  // bool or float32
  const Tensor* past_key = nullptr;
  const Tensor* past_value = nullptr;
};

// Returns {Y, present_key, present_value, qk_matmul_output} as float32.
std::vector<Tensor> AttentionReference(const AttentionAttrs& a, const AttentionInputs& in);

}  // namespace oneinfer
