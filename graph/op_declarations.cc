// Signatures ONNX's library (1.12: opsets up to 17) does not have, for the operators our kernels
// run: ai.onnx versions 18 to 23, the engine's internal ops and the com.microsoft ops.
// Inputs and outputs are one letter per formal parameter: 'r' required, 'o' optional,
// 'v' variadic (at least one), 'w' variadic that may be empty.
#include "graph/internal_ops.h"
#include "graph/op_schema.h"

namespace oneinfer {

namespace {

using T = Attribute::Type;
struct A {
  const char* name;
  T type;
  bool required = false;
};

OpSignature Op(const char* domain, const char* op, int64_t since, const char* inputs, const char* outputs,
               std::initializer_list<A> attrs = {}) {
  OpSignature s;
  s.domain = domain;
  s.op_type = op;
  s.since_version = since;
  s.inputs = inputs;
  s.outputs = outputs;
  for (const A& a : attrs) s.attrs[a.name] = {a.type, a.required};
  s.source = "oneinfer";
  return s;
}

// A version whose change was only in the types it accepts.
OpSignature Retyped(const char* op, int64_t since) {
  OpSignature s = Op("", op, since, "", "");
  s.same_as_before = true;
  return s;
}

std::vector<OpSignature> Declarations() {
  std::vector<OpSignature> d;
  // ai.onnx 18.
  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"}) d.push_back(Op("", op, 18, "rr", "r"));
  d.push_back(Op("", "BitwiseNot", 18, "r", "r"));
  d.push_back(Op("", "Mish", 18, "r", "r"));
  d.push_back(Op("", "GroupNormalization", 18, "rrr", "r",
                 {{"epsilon", T::kFloat}, {"num_groups", T::kInt, true}}));
  d.push_back(Op("", "LpPool", 18, "r", "r",
                 {{"auto_pad", T::kString}, {"ceil_mode", T::kInt}, {"dilations", T::kInts},
                  {"kernel_shape", T::kInts, true}, {"p", T::kInt}, {"pads", T::kInts}, {"strides", T::kInts}}));
  d.push_back(Op("", "Pad", 18, "rroo", "r", {{"mode", T::kString}}));
  d.push_back(Op("", "Resize", 18, "rooo", "r",
                 {{"antialias", T::kInt}, {"axes", T::kInts}, {"coordinate_transformation_mode", T::kString},
                  {"cubic_coeff_a", T::kFloat}, {"exclude_outside", T::kInt}, {"extrapolation_value", T::kFloat},
                  {"keep_aspect_ratio_policy", T::kString}, {"mode", T::kString}, {"nearest_mode", T::kString}}));
  d.push_back(Op("", "Split", 18, "ro", "v", {{"axis", T::kInt}, {"num_outputs", T::kInt}}));
  for (const char* op : {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
                         "ReduceMin", "ReduceProd", "ReduceSumSquare"}) {
    d.push_back(Op("", op, 18, "ro", "r", {{"keepdims", T::kInt}, {"noop_with_empty_axes", T::kInt}}));
  }
  d.push_back(Op("", "OptionalHasElement", 18, "o", "r"));
  for (const char* op : {"OptionalGetElement", "ScatterND", "ScatterElements"}) d.push_back(Retyped(op, 18));
  // ai.onnx 19.
  d.push_back(Op("", "AveragePool", 19, "r", "r",
                 {{"auto_pad", T::kString}, {"ceil_mode", T::kInt}, {"count_include_pad", T::kInt},
                  {"dilations", T::kInts}, {"kernel_shape", T::kInts, true}, {"pads", T::kInts}, {"strides", T::kInts}}));
  d.push_back(Op("", "Cast", 19, "r", "r", {{"saturate", T::kInt}, {"to", T::kInt, true}}));
  d.push_back(Op("", "CastLike", 19, "rr", "r", {{"saturate", T::kInt}}));
  d.push_back(Op("", "QuantizeLinear", 19, "rro", "r", {{"axis", T::kInt}, {"saturate", T::kInt}}));
  for (const char* op : {"DequantizeLinear", "Equal", "Identity", "If", "Loop", "Pad", "Reshape", "Resize", "Scan",
                         "Shape", "Size"}) {
    d.push_back(Retyped(op, 19));
  }
  // ai.onnx 20.
  d.push_back(Op("", "DFT", 20, "roo", "r", {{"inverse", T::kInt}, {"onesided", T::kInt}}));
  d.push_back(Op("", "Gelu", 20, "r", "r", {{"approximate", T::kString}}));
  d.push_back(Op("", "RegexFullMatch", 20, "r", "r", {{"pattern", T::kString}}));
  d.push_back(Op("", "StringConcat", 20, "rr", "r"));
  d.push_back(Op("", "StringSplit", 20, "r", "rr", {{"delimiter", T::kString}, {"maxsplit", T::kInt}}));
  for (const char* op : {"ConstantOfShape", "GridSample", "IsInf", "IsNaN", "ReduceMax", "ReduceMin"}) {
    d.push_back(Retyped(op, 20));
  }
  // ai.onnx 21.
  d.push_back(Op("", "DequantizeLinear", 21, "rro", "r", {{"axis", T::kInt}, {"block_size", T::kInt}}));
  d.push_back(Op("", "QuantizeLinear", 21, "rro", "r",
                 {{"axis", T::kInt}, {"block_size", T::kInt}, {"output_dtype", T::kInt}, {"saturate", T::kInt}}));
  d.push_back(Op("", "GroupNormalization", 21, "rrr", "r",
                 {{"epsilon", T::kFloat}, {"num_groups", T::kInt, true}, {"stash_type", T::kInt}}));
  for (const char* op : {"Cast", "CastLike", "ConstantOfShape", "Flatten", "Identity", "If", "Loop", "Pad",
                         "QLinearMatMul", "Reshape", "Scan", "Shape", "Size", "Squeeze", "Transpose", "Unsqueeze"}) {
    d.push_back(Retyped(op, 21));
  }
  // ai.onnx 22: bfloat16 added to these; nothing else changed.
  for (const char* op : {"Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "AveragePool", "Bernoulli", "Conv",
                         "ConvTranspose", "Cos", "Cosh", "Det", "Dropout", "Elu", "EyeLike", "GRU",
                         "GlobalAveragePool", "GlobalMaxPool", "GridSample", "HardSigmoid", "HardSwish",
                         "InstanceNormalization", "LSTM", "LpPool", "MaxPool", "MaxUnpool", "Mish", "Multinomial",
                         "NegativeLogLikelihoodLoss", "RNN", "RandomNormal", "RandomNormalLike", "RandomUniform",
                         "RandomUniformLike", "RoiAlign", "Round", "Selu", "Sin", "Sinh", "Softplus", "Softsign",
                         "Tan", "ThresholdedRelu"}) {
    d.push_back(Retyped(op, 22));
  }
  // ai.onnx 23: float4e2m1 added to these (and the Q/DQ pair gained an attribute each).
  for (const char* op : {"Cast", "CastLike", "ConstantOfShape", "Flatten", "Identity", "If", "Loop", "Pad", "Reshape",
                         "Scan", "Shape", "Size", "Squeeze", "Transpose", "Unsqueeze"}) {
    d.push_back(Retyped(op, 23));
  }
  d.push_back(Op("", "DequantizeLinear", 23, "rro", "r",
                 {{"axis", T::kInt}, {"block_size", T::kInt}, {"output_dtype", T::kInt}}));
  d.push_back(Op("", "QuantizeLinear", 23, "rro", "r",
                 {{"axis", T::kInt}, {"block_size", T::kInt}, {"output_dtype", T::kInt}, {"precision", T::kInt},
                  {"saturate", T::kInt}}));
  d.push_back(Op("", "RMSNormalization", 23, "rr", "r",
                 {{"axis", T::kInt}, {"epsilon", T::kFloat}, {"stash_type", T::kInt}}));
  d.push_back(Op("", "RotaryEmbedding", 23, "rrro", "r",
                 {{"interleaved", T::kInt}, {"num_heads", T::kInt}, {"rotary_embedding_dim", T::kInt}}));
  // Attention's inputs Q, K, V, attn_mask, past_key, past_value; outputs Y, present_key,
  // present_value, qk_matmul_output (nonpad_kv_seqlen is opset 24's).
  d.push_back(Op("", "Attention", 23, "rrrooo", "rooo",
                 {{"is_causal", T::kInt}, {"kv_num_heads", T::kInt}, {"q_num_heads", T::kInt},
                  {"qk_matmul_output_mode", T::kInt}, {"scale", T::kFloat}, {"softcap", T::kFloat},
                  {"softmax_precision", T::kInt}}));

  // com.microsoft: the QDQ pair as ONNX Runtime's quantizer writes it (per-axis since version 1).
  for (const char* op : {"QuantizeLinear", "DequantizeLinear"}) {
    d.push_back(Op("com.microsoft", op, 1, "rro", "r", {{"axis", T::kInt}}));
  }

  // ONNX Runtime's contrib operators the kernels run (ops/contrib_*.cc), as its schemas declare
  // them; SimplifiedLayerNormalization is registered in the ai.onnx domain, as ONNX Runtime does.
  d.push_back(Op("", "SimplifiedLayerNormalization", 1, "rr", "roo",
                 {{"axis", T::kInt}, {"epsilon", T::kFloat}, {"stash_type", T::kInt}}));
  d.push_back(Op("com.microsoft", "SkipSimplifiedLayerNormalization", 1, "rrro", "rooo", {{"epsilon", T::kFloat}}));
  d.push_back(Op("com.microsoft", "SkipLayerNormalization", 1, "rrroo", "rooo", {{"epsilon", T::kFloat}}));
  d.push_back(Op("com.microsoft", "Gelu", 1, "r", "r"));
  d.push_back(Op("com.microsoft", "BiasGelu", 1, "rr", "r"));
  d.push_back(Op("com.microsoft", "FastGelu", 1, "ro", "r"));
  d.push_back(Op("com.microsoft", "QuickGelu", 1, "r", "r", {{"alpha", T::kFloat}}));
  d.push_back(Op("com.microsoft", "FusedMatMul", 1, "rr", "r",
                 {{"alpha", T::kFloat}, {"transA", T::kInt}, {"transB", T::kInt}, {"transBatchA", T::kInt},
                  {"transBatchB", T::kInt}}));
  d.push_back(Op("com.microsoft", "MatMulNBits", 1, "rrrooo", "r",
                 {{"K", T::kInt, true}, {"N", T::kInt, true}, {"bits", T::kInt}, {"block_size", T::kInt, true},
                  {"accuracy_level", T::kInt}}));
  // GroupQueryAttention's 16 inputs: query, key, value, past_key, past_value, seqlens_k,
  // total_sequence_length, cos_cache, sin_cache, position_ids, attention_bias, head_sink, k_scale,
  // v_scale, q_norm_weight, k_norm_weight; outputs output, present_key, present_value, output_qk.
  d.push_back(Op("com.microsoft", "GroupQueryAttention", 1, "roooorrooooooooo", "rooo",
                 {{"num_heads", T::kInt, true}, {"kv_num_heads", T::kInt, true}, {"causal", T::kInt},
                  {"scale", T::kFloat}, {"softcap", T::kFloat}, {"local_window_size", T::kInt},
                  {"sliding_window_cache", T::kInt}, {"do_rotary", T::kInt}, {"rotary_interleaved", T::kInt},
                  {"smooth_softmax", T::kInt}, {"qk_output", T::kInt}, {"k_quant_type", T::kString},
                  {"v_quant_type", T::kString}, {"kv_cache_bit_width", T::kInt}, {"qk_norm_epsilon", T::kFloat}}));
  d.push_back(Op("com.microsoft", "RotaryEmbedding", 1, "rrrr", "r",
                 {{"scale", T::kFloat}, {"interleaved", T::kInt}, {"rotary_embedding_dim", T::kInt},
                  {"num_heads", T::kInt}, {"is_packed_batching", T::kInt}}));

  // The engine's internal ops (graph/internal_ops.h), as the passes write them.
  namespace io = internal_ops;
  const char* in = io::kDomain;
  const int64_t v = io::kOpset;
  d.push_back(Op(in, io::QdqMatMul::kName, v, "rrorrooo", "r",
                 {{io::QdqMatMul::kOut, T::kString}, {io::QdqMatMul::kYAxis, T::kInt}}));
  d.push_back(Op(in, io::WeightDequantMatMul::kName, v, "rrro", "r",
                 {{io::WeightDequantMatMul::kAxis, T::kInt}, {io::WeightDequantMatMul::kBlockSize, T::kInt}}));
  d.push_back(Op(in, io::MatMulGroup::kName, v, "rv", "v"));
  d.push_back(Op(in, io::MatMulQ4NX::kName, v, "rr", "r",
                 {{io::MatMulQ4NX::kK, T::kInt, true}, {io::MatMulQ4NX::kN, T::kInt, true}}));
  d.push_back(Op(in, io::RMSNorm::kName, v, "rr", "r", {{io::RMSNorm::kEpsilon, T::kFloat}, {io::RMSNorm::kReciprocal, T::kInt}}));
  d.push_back(Op(in, io::KVCacheAppend::kName, v, "rro", "ro",
                 {{io::KVCacheAppend::kSlot, T::kInt}, {io::KVCacheAppend::kAxis, T::kInt},
                  {io::KVCacheAppend::kGrow, T::kInt}}));
  d.push_back(Op(in, io::KVCacheFinish::kName, v, "rw", "r"));
  d.push_back(Op(in, io::SoftmaxAttention::kName, v, "rrro", "r",
                 {{io::SoftmaxAttention::kAlpha, T::kFloat}, {io::SoftmaxAttention::kScale, T::kFloat},
                  {io::SoftmaxAttention::kKVRepeat, T::kInt}}));
  d.push_back(Op(in, io::RotateHalf::kName, v, "rrr", "r"));
  d.push_back(Op(in, io::SiLU::kName, v, "ro", "r"));
  d.push_back(Op(in, io::KVCacheConcat::kName, v, "rr", "r",
                 {{io::KVCacheConcat::kAxis, T::kInt, true}, {io::KVCacheConcat::kGrow, T::kInt}}));
  d.push_back(Op(in, io::FusedConv::kName, v, "rro", "r",
                 {{"auto_pad", T::kString}, {"dilations", T::kInts}, {"group", T::kInt}, {"kernel_shape", T::kInts},
                  {"pads", T::kInts}, {"strides", T::kInts}, {io::FusedConv::kActivation, T::kString},
                  {io::FusedConv::kActivationParams, T::kFloats}, {io::FusedConv::kOutputAffine, T::kFloats}}));
  return d;
}

}  // namespace

const std::vector<OpSignature>& OpDeclarations() {
  static const std::vector<OpSignature>* declarations = new std::vector<OpSignature>(Declarations());
  return *declarations;
}

}  // namespace oneinfer
