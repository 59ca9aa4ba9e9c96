// Model conversion: a Hugging Face decoder checkpoint (Qwen3, Qwen2, Llama, Mistral) -> an ONNX
// graph (float, int8, int4 or Q4NX weights), and a float ONNX graph -> a static A8W8 QDQ graph
// calibrated on sample data. The `oneinfer export-hf` (alias export-qwen3) and `oneinfer quantize`
// commands are these functions plus flags.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "oneinfer/export.h"
#include "oneinfer/session.h"

namespace oneinfer {

// How ExportQwen3 stores the projection and lm_head weights (the embedding stays float).
enum class Qwen3Weights {
  kFloat,  // float32 [in, out]
  kInt8,   // int8 per output column (symmetric) + DequantizeLinear axis=1
  kInt4,   // int4 in blocks of 32 along K (q4_0-style) + DequantizeLinear axis=0, block_size=32
  kQ4NX,   // q4_1 in a Q4NX file beside the graph (docs/q4nx.md), bound at load by oneinfer
};

struct ExportQwen3Options {
  // Adds past_kv float [2L, 1, KVH, P, D] -> present_kv [2L, 1, KVH, P+S, D].
  bool cached = false;
  Qwen3Weights weights = Qwen3Weights::kFloat;
};

// The files ExportQwen3 wrote.
struct ExportQwen3Result {
  std::string model;  // the graph
  std::string data;   // its external data (model + ".data")
  std::string q4nx;   // the Q4NX weight file (kQ4NX only, else empty)
};

// Reads checkpoint_dir (config.json and model.safetensors, or shards with
// model.safetensors.index.json; BF16, F16 or F32; model_type qwen3, qwen2, llama or mistral)
// and writes an opset-21 graph to `model`:
// input_ids int64 [1, S] -> logits float [1, S, V]. tokenizer.json, tokenizer_config.json and
// generation_config.json are copied beside it.
ONEINFER_API absl::StatusOr<ExportQwen3Result> ExportQwen3(const std::string& checkpoint_dir, const std::string& model,
                                                           const ExportQwen3Options& options = {});

struct RandomQwen3Options {
  // "tiny" (a 2-layer Qwen3 of small widths), "qwen3-0.6b", "llama-tiny" or "qwen2-tiny"
  std::string architecture = "tiny";
  int64_t layers = 0;                 // > 0 overrides the layer count
  uint64_t seed = 0;
};

// Writes a random-weight checkpoint (config.json + model.safetensors, BF16) into dir, for tests
// and examples that need a Qwen3 without downloading one.
ONEINFER_API absl::Status WriteRandomQwen3(const std::string& dir, const RandomQwen3Options& options = {});

enum class CalibrationMethod {
  kMinMax,      // the observed min..max
  kPercentile,  // the range holding the central `percentile` % (graph outputs keep min..max)
};

struct QuantizeA8W8Options {
  bool per_channel = true;  // weight scales per output column (axis 1), else one per tensor
  // Calibration data, at most one of: a text file (tokenised), a token-id file (one sequence per
  // line, ',' or ' ' between ids), a folder of input_*.pb sets (or one such set per subfolder).
  // None: a built-in English sample, tokenised.
  std::string calib_text, calib_ids, calib_inputs;
  std::string tokenizer;       // tokenizer.json; empty: the one beside the model
  int64_t calib_seq = 128;     // tokens per calibration run
  int64_t calib_tokens = 2048; // at most this many calibration (and evaluation) tokens
  CalibrationMethod method = CalibrationMethod::kMinMax;
  double percentile = 99.99;   // kPercentile: from a 2048-bin histogram per tensor
  bool activation_uint8 = true;  // uint8 asymmetric (ONNX Runtime's form), else int8 symmetric
  bool matmul_only = false;    // quantise the MatMul inputs only; their outputs stay float
  std::string domain;          // of the Q/DQ nodes: "" (ai.onnx) or "com.microsoft"
  SessionOptions session;      // for the calibration and evaluation runs (num_threads 0 = all cores)
  // Afterwards, run the float and the quantised graphs on this text file / id file and compare
  // their logits (a causal LM only; at most one of the two).
  std::string eval_text, eval_ids;
};

// Float vs quantised logits over the evaluation positions.
struct QuantizationEval {
  int64_t positions = 0;
  double mean_kl = 0, max_kl = 0;  // KL(float || quantised) of the softmax, nats
  double top1_agreement = 0;       // fraction of positions with the same argmax
  double uniform_kl = 0;           // for scale: the float model's mean KL to a uniform distribution
};

struct QuantizeA8W8Report {
  int quantized_matmuls = 0;
  int64_t activation_ranges = 0;   // tensors whose ranges were measured
  int calibration_runs = 0;
  int64_t calibration_tokens = 0;  // 0 for input-folder calibration
  std::string calibration_source;  // what the ranges came from, in words
  std::vector<std::pair<std::string, int>> left_float;  // why a MatMul stayed float -> how many
  std::string data;                // the external data file written beside the output
  // With eval_text or eval_ids: the output was written either way; eval_status says whether
  // the comparison ran, eval holds its numbers when it did.
  absl::Status eval_status;
  QuantizationEval eval;
};

// Static A8W8: each MatMul with a constant 2-D float weight [K, N] gets an int8 weight
// (symmetric, scale amax/127) behind a DequantizeLinear, and its activation (and, unless
// matmul_only, its output) a QuantizeLinear -> DequantizeLinear pair whose range comes from
// running the float graph on calibration data. Writes `output` with its weights in
// output + ".data"; the side files beside `model` (tokenizer.json, ...) are copied.
ONEINFER_API absl::StatusOr<QuantizeA8W8Report> QuantizeA8W8(const std::string& model, const std::string& output,
                                                             const QuantizeA8W8Options& options = {});

}  // namespace oneinfer
