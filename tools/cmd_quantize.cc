// oneinfer quantize: flags and printing around QuantizeA8W8 (oneinfer/convert.h, implemented in
// convert/).
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "oneinfer/convert.h"
#include "tools/cli.h"
#include "tools/env_options.h"

namespace oneinfer::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kHelp =
    "usage: oneinfer quantize MODEL.onnx -o OUT.onnx --a8w8 [options]\n"
    "\n"
    "Static A8W8: each MatMul with a constant 2-D float weight [K, N] gets an int8 weight\n"
    "(symmetric, scale amax/127) behind a DequantizeLinear, and its activation a\n"
    "QuantizeLinear -> DequantizeLinear pair whose range comes from running the float graph on\n"
    "calibration data. Weights go to OUT.onnx.data (the int8 weights keep their names);\n"
    "tokenizer.json and the other side files beside MODEL are copied beside OUT.\n"
    "\n"
    "  --per-channel | --per-tensor   weight scales per output column (axis 1, default) or one\n"
    "  --calib FILE                   calibration text, tokenised with the model's tokenizer\n"
    "  --calib-ids FILE               calibration token ids (one sequence per line, ',' or ' ')\n"
    "  --calib-inputs DIR             calibration feeds for any graph: DIR/input_*.pb, or one\n"
    "                                 such set per subfolder of DIR (as `oneinfer exec` reads)\n"
    "                                 (no calibration option: a built-in English sample, tokenised)\n"
    "  --tokenizer PATH               tokenizer.json (default: beside the model)\n"
    "  --calib-seq N                  tokens per calibration run (default 128)\n"
    "  --calib-tokens N               at most this many calibration (and evaluation) tokens (default 2048)\n"
    "  --method minmax|percentile     activation range: the observed min..max (default), or the\n"
    "                                 range holding the central --percentile % of the values\n"
    "                                 (a graph output such as the logits always keeps min..max)\n"
    "  --percentile P                 (default 99.99) from a 2048-bin histogram per tensor\n"
    "  --activation-type uint8|int8   uint8 asymmetric (default, ONNX Runtime's form) or int8\n"
    "                                 symmetric (AMD Quark's form)\n"
    "  --matmul-only                  quantise the MatMul inputs only; the MatMul output stays\n"
    "                                 float (default: it also gets QuantizeLinear -> DequantizeLinear)\n"
    "  --domain ai.onnx|com.microsoft the domain of the Q/DQ nodes (default ai.onnx)\n"
    "  --eval FILE | --eval-ids FILE  afterwards, run float and QDQ graphs on this text / these ids\n"
    "                                 and print the mean KL (nats) and top-1 agreement over positions\n"
    "  --threads N                    threads for the calibration runs (default: all cores)\n";

bool ParseCount(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtoll(s.c_str(), &end, 10);
  return *end == '\0' && *v > 0;
}

void PrintReport(const QuantizeA8W8Report& r, const QuantizeA8W8Options& o, const std::string& out) {
  std::cout << "quantised " << r.quantized_matmuls << " MatMuls (" << (o.per_channel ? "per-channel" : "per-tensor")
            << " int8 weights, " << (o.activation_uint8 ? "uint8" : "int8") << " activations, "
            << (o.method == CalibrationMethod::kMinMax ? "minmax" : absl::StrFormat("percentile %g", o.percentile)) << ", "
            << r.activation_ranges << " activation ranges from " << r.calibration_runs
            << (r.calibration_runs == 1 ? " run" : " runs");
  if (r.calibration_tokens > 0) std::cout << " / " << r.calibration_tokens << " tokens";
  std::cout << " of " << r.calibration_source << ")";
  for (const auto& [why, c] : r.left_float) std::cout << "; left float: " << c << " (" << why << ")";
  std::cout << "\nwrote " << out << " (+ " << fs::path(out).filename().string() << ".data)\n";
}

}  // namespace

int CmdQuantize(int argc, char** argv) {
  Args args(argc, argv, 2);
  if (args.TakeFlag("--help", "-h")) {
    std::cout << kHelp << EnvironmentHelp();
    return 0;
  }
  QuantizeA8W8Options o;
  std::string out, method, act, domain, pct, seq, tokens, threads;
  args.Take("-o", &out, "--output");
  const bool a8w8 = args.TakeFlag("--a8w8");
  const bool per_channel = args.TakeFlag("--per-channel");
  const bool per_tensor = args.TakeFlag("--per-tensor");
  args.Take("--calib", &o.calib_text);
  args.Take("--calib-ids", &o.calib_ids);
  args.Take("--calib-inputs", &o.calib_inputs);
  args.Take("--tokenizer", &o.tokenizer);
  args.Take("--calib-seq", &seq);
  args.Take("--calib-tokens", &tokens);
  args.Take("--method", &method);
  args.Take("--percentile", &pct);
  args.Take("--activation-type", &act);
  args.Take("--domain", &domain);
  args.Take("--eval", &o.eval_text);
  args.Take("--eval-ids", &o.eval_ids);
  args.Take("--threads", &threads);
  o.matmul_only = args.TakeFlag("--matmul-only");
  std::vector<std::string> pos;
  if (auto s = args.Positionals(&pos); !s.ok()) return Fail(s);
  if (pos.size() != 1) return Fail("quantize needs exactly one MODEL.onnx (see oneinfer quantize --help)");
  if (out.empty()) return Fail("quantize needs -o OUT.onnx");
  if (!a8w8) return Fail("quantize needs a scheme: --a8w8 (the only one so far)");
  if (per_channel && per_tensor) return Fail("--per-channel and --per-tensor exclude each other");
  o.per_channel = !per_tensor;
  if (method.empty() || method == "minmax") o.method = CalibrationMethod::kMinMax;
  else if (method == "percentile") o.method = CalibrationMethod::kPercentile;
  else return Fail(absl::StrCat("--method '", method, "' must be minmax or percentile"));
  if (!pct.empty()) {
    char* end = nullptr;
    o.percentile = std::strtod(pct.c_str(), &end);
    if (*end != '\0' || !(o.percentile > 50.0 && o.percentile <= 100.0)) return Fail(absl::StrCat("--percentile '", pct, "' must be in (50, 100]"));
    if (o.method != CalibrationMethod::kPercentile) return Fail("--percentile needs --method percentile");
  }
  if (act.empty() || act == "uint8") o.activation_uint8 = true;
  else if (act == "int8") o.activation_uint8 = false;
  else return Fail(absl::StrCat("--activation-type '", act, "' must be uint8 or int8"));
  if (domain.empty() || domain == "ai.onnx") o.domain = "";
  else if (domain == "com.microsoft") o.domain = domain;
  else return Fail(absl::StrCat("--domain '", domain, "' must be ai.onnx or com.microsoft"));
  int64_t v = 0;
  if (!seq.empty()) {
    if (!ParseCount(seq, &v)) return Fail(absl::StrCat("--calib-seq '", seq, "' is not a positive count"));
    o.calib_seq = v;
  }
  if (!tokens.empty()) {
    if (!ParseCount(tokens, &v)) return Fail(absl::StrCat("--calib-tokens '", tokens, "' is not a positive count"));
    o.calib_tokens = v;
  }
  if (!threads.empty()) {
    if (!ParseCount(threads, &v)) return Fail(absl::StrCat("--threads '", threads, "' is not a positive count"));
    o.session.num_threads = static_cast<int>(v);
  }
  const int sources = !o.calib_text.empty() + !o.calib_ids.empty() + !o.calib_inputs.empty();
  if (sources > 1) return Fail("give at most one of --calib, --calib-ids and --calib-inputs");
  if (!o.eval_text.empty() && !o.eval_ids.empty()) return Fail("give at most one of --eval and --eval-ids");
  if (auto s = ApplySessionEnvironment(&o.session); !s.ok()) return Fail(s);
  auto r = QuantizeA8W8(pos[0], out, o);
  if (!r.ok()) return Fail(r.status());
  PrintReport(*r, o, out);
  if (!o.eval_text.empty() || !o.eval_ids.empty()) {
    if (!r->eval_status.ok()) return Fail(r->eval_status);
    const QuantizationEval& e = r->eval;
    std::cout << absl::StrFormat("eval: %d positions, mean KL %.6f nats, max KL %.6f, top-1 agreement %.1f%% "
                                 "(for scale: the float model's mean KL to a uniform distribution is %.6f)\n",
                                 e.positions, e.mean_kl, e.max_kl, 100.0 * e.top1_agreement, e.uniform_kl);
  }
  return 0;
}

}  // namespace oneinfer::cli
