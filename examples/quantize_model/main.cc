// quantize_model: the conversion API (oneinfer/convert.h) end to end, with no download.
//
//   quantize_model WORK_DIR [--threads N]
//
// Writes a random tiny Qwen3 checkpoint to WORK_DIR/ckpt, exports it to WORK_DIR/float/model.onnx,
// quantises that to static A8W8 in WORK_DIR/a8w8/model.onnx (calibrated on WORK_DIR/ids.txt, a
// few token ids written here, and evaluated on the same ids), then runs both graphs on one
// prompt. Output:
//   exported WORK_DIR/float/model.onnx (+ model.onnx.data)
//   quantized N MatMuls (R activation ranges from C runs / T tokens); left float: M
//   eval: P positions, mean KL K nats, top-1 agreement A%
//   next token: float F, a8w8 Q
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "oneinfer/convert.h"
#include "oneinfer/session.h"

namespace {

int Fail(const char* what, const absl::Status& s) {
  std::fprintf(stderr, "quantize_model: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

// The argmax of the last position's logits for `ids`.
absl::StatusOr<int64_t> NextToken(const std::string& model, const std::vector<int64_t>& ids,
                                  const oneinfer::SessionOptions& options) {
  auto session = oneinfer::Session::Load(model, options);
  if (!session.ok()) return session.status();
  std::vector<oneinfer::Feed> feeds;
  feeds.emplace_back("input_ids", oneinfer::Tensor::FromVector(oneinfer::DType::kInt64,
                                                               {1, static_cast<int64_t>(ids.size())}, ids));
  auto out = (*session)->Run(feeds, {"logits"});
  if (!out.ok()) return out.status();
  const oneinfer::Tensor& logits = (*out)[0];
  const int64_t V = logits.dim(2);
  const float* last = logits.data<float>() + (logits.dim(1) - 1) * V;
  int64_t best = 0;
  for (int64_t v = 1; v < V; ++v) {
    if (last[v] > last[best]) best = v;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--threads")) {
    std::fprintf(stderr, "usage: quantize_model WORK_DIR [--threads N]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int threads = argc == 4 ? std::atoi(argv[3]) : 0;

  oneinfer::RandomQwen3Options random;
  random.architecture = "tiny";
  random.seed = 7;
  if (auto s = oneinfer::WriteRandomQwen3(dir + "/ckpt", random); !s.ok()) return Fail("random checkpoint", s);

  auto exported = oneinfer::ExportQwen3(dir + "/ckpt", dir + "/float/model.onnx");
  if (!exported.ok()) return Fail("export", exported.status());
  std::printf("exported %s (+ %s)\n", exported->model.c_str(), "model.onnx.data");

  // Calibration ids: two short sequences (no tokenizer needed).
  const std::string ids_file = dir + "/ids.txt";
  std::ofstream(ids_file) << "9707, 11, 847, 829, 374, 1207, 16948, 323\n358, 1079, 264, 2797, 1614, 13\n";
  oneinfer::QuantizeA8W8Options options;
  options.calib_ids = ids_file;
  options.eval_ids = ids_file;
  options.session.num_threads = threads;
  auto report = oneinfer::QuantizeA8W8(exported->model, dir + "/a8w8/model.onnx", options);
  if (!report.ok()) return Fail("quantize", report.status());
  int left = 0;
  for (const auto& reason : report->left_float) left += reason.second;
  std::printf("quantized %d MatMuls (%lld activation ranges from %d runs / %lld tokens); left float: %d\n",
              report->quantized_matmuls, static_cast<long long>(report->activation_ranges),
              report->calibration_runs, static_cast<long long>(report->calibration_tokens), left);
  if (!report->eval_status.ok()) return Fail("evaluate", report->eval_status);
  std::printf("eval: %lld positions, mean KL %.6f nats, top-1 agreement %.1f%%\n",
              static_cast<long long>(report->eval.positions), report->eval.mean_kl,
              100.0 * report->eval.top1_agreement);

  oneinfer::SessionOptions session_options;
  session_options.num_threads = threads;
  const std::vector<int64_t> prompt = {9707, 11, 847, 829};
  auto f = NextToken(exported->model, prompt, session_options);
  if (!f.ok()) return Fail("float run", f.status());
  auto q = NextToken(dir + "/a8w8/model.onnx", prompt, session_options);
  if (!q.ok()) return Fail("a8w8 run", q.status());
  std::printf("next token: float %lld, a8w8 %lld\n", static_cast<long long>(*f), static_cast<long long>(*q));
  return 0;
}
