// oneinfer export-hf (also export-qwen3, its first name): flags and printing around ExportQwen3 /
// WriteRandomQwen3 (oneinfer/convert.h, implemented in convert/).
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "oneinfer/convert.h"
#include "tools/cli.h"

namespace oneinfer::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kHelp =
    "usage: oneinfer export-hf CHECKPOINT_DIR -o MODEL.onnx [--cached] [--weights FORMAT]\n"
    "       oneinfer export-hf --random CONFIG -o DIR [--layers N] [--seed S]\n"
    "       (export-qwen3 is the same command)\n"
    "\n"
    "Reads a Hugging Face decoder's config.json and model.safetensors (or shards with\n"
    "model.safetensors.index.json; BF16, F16 or F32) and writes a float32 opset-21 graph with\n"
    "weights in MODEL.onnx.data. model_type qwen3 (q/k norm), qwen2 (q/k/v biases), llama\n"
    "(attention_bias, rope_scaling llama3) or mistral (the context stops at sliding_window).\n"
    "  default    input_ids int64 [1, S] -> logits float [1, S, V]\n"
    "  --cached   adds past_kv float [2L, 1, KVH, P, D] -> present_kv [2L, 1, KVH, P+S, D]\n"
    "             (index 2l = key of layer l, 2l+1 = value); positions start at P\n"
    "  --weights  float (default) | int8: projections and lm_head as int8 per output column\n"
    "             (symmetric) + DequantizeLinear axis=1 | int4: int4 in blocks of 32 along K\n"
    "             (q4_0-style symmetric) + DequantizeLinear axis=0, block_size=32; the embedding\n"
    "             Gather keeps its float table | q4nx: projections and lm_head as 4-bit q4_1\n"
    "             in MODEL.q4nx (a Q4NX file), read by the graph as float [in, out] inputs\n"
    "             of their checkpoint names, bound from that file at load (docs/q4nx.md)\n"
    "tokenizer.json, tokenizer_config.json and generation_config.json are copied beside it.\n"
    "\n"
    "--random writes a random-weight checkpoint (config.json + model.safetensors, BF16) of a\n"
    "named architecture: qwen3-0.6b (the real shape), tiny (a 2-layer Qwen3 of small widths),\n"
    "llama-tiny (Llama 3 form: untied head, llama3 rope scaling) or qwen2-tiny (q/k/v biases);\n"
    "--layers overrides the layer count (e.g. a 2-layer model at the real widths).\n";

}  // namespace

int CmdExportQwen3(int argc, char** argv) {
  Args args(argc, argv, 2);
  if (args.TakeFlag("--help", "-h")) {
    std::cout << kHelp;
    return 0;
  }
  std::string out, random, layers, seed;
  args.Take("-o", &out, "--output");
  args.Take("--random", &random);
  args.Take("--layers", &layers);
  args.Take("--seed", &seed);
  ExportQwen3Options options;
  options.cached = args.TakeFlag("--cached");
  std::string weights = "float";
  args.Take("--weights", &weights);
  if (weights == "float") options.weights = Qwen3Weights::kFloat;
  else if (weights == "int8") options.weights = Qwen3Weights::kInt8;
  else if (weights == "int4") options.weights = Qwen3Weights::kInt4;
  else if (weights == "q4nx") options.weights = Qwen3Weights::kQ4NX;
  else return Fail(absl::StrCat("--weights takes float, int8, int4 or q4nx, not '", weights, "'"));
  std::vector<std::string> pos;
  if (auto s = args.Positionals(&pos); !s.ok()) return Fail(s);
  if (out.empty()) return Fail("export-hf needs -o OUTPUT (see oneinfer export-hf --help)");
  RandomQwen3Options random_options;
  try {
    if (!layers.empty()) random_options.layers = std::stoll(layers);
    if (!seed.empty()) random_options.seed = std::stoull(seed);
  } catch (...) {
    return Fail("--layers and --seed take numbers");
  }
  if (!random.empty()) {
    if (!pos.empty()) return Fail("--random takes no checkpoint folder");
    random_options.architecture = random;
    auto s = WriteRandomQwen3(out, random_options);
    if (!s.ok()) return Fail(s);
    std::cout << "wrote a random " << random << " checkpoint to " << out << "\n";
    return 0;
  }
  if (pos.size() != 1) return Fail("export-hf needs one CHECKPOINT_DIR (see oneinfer export-hf --help)");
  if (!fs::is_directory(pos[0])) return Fail(absl::StrCat("checkpoint folder '", pos[0], "' does not exist"));
  auto r = ExportQwen3(pos[0], out, options);
  if (!r.ok()) return Fail(r.status());
  std::cout << "wrote " << out << " (+ " << fs::path(r->data).filename().string();
  if (!r->q4nx.empty()) std::cout << ", " << fs::path(r->q4nx).filename().string();
  std::cout << ")\n";
  return 0;
}

}  // namespace oneinfer::cli
