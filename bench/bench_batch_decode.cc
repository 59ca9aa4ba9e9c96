// Continuous batching at the engine: one BatchGenerator step over B sequences (each one token
// past a 32-token prompt) against B = 1, as aggregate tokens per second. The model comes from
// ONEINFER_BENCH_MODEL (a cached causal LM, e.g. `oneinfer export-hf --random qwen3-0.6b` then
// `export-hf --cached`); ONEINFER_BENCH_MATMUL=int8 runs it with dynamic int8 MatMuls. Without
// the variable the benchmarks are skipped; ONEINFER_BENCH_PROFILE=1 logs each step's node profile.
//   ONEINFER_BENCH_MODEL=/tmp/q/model.onnx ONEINFER_BENCH_MATMUL=int8 build/bench_batch_decode
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "oneinfer/batch_generator.h"
#include "oneinfer/session.h"

namespace {

const oneinfer::Session* LoadOnce(std::string* error) {
  static std::unique_ptr<oneinfer::Session> session;
  static std::string load_error;
  static bool tried = false;
  if (!tried) {
    tried = true;
    const char* path = std::getenv("ONEINFER_BENCH_MODEL");
    const char* matmul = std::getenv("ONEINFER_BENCH_MATMUL");
    if (path == nullptr) {
      load_error = "set ONEINFER_BENCH_MODEL to a cached causal-LM .onnx";
    } else {
      oneinfer::SessionOptions so;
      so.num_threads = 2;
      so.resident_tables = true;  // as `oneinfer serve` loads it: no cold embedding pages in a step
      if (std::getenv("ONEINFER_BENCH_PROFILE") != nullptr) {  // per-step node profile in the log
        so.profile = true;
        so.log_level = oneinfer::LogLevel::kVerbose;
      }
      if (matmul != nullptr && std::string(matmul) == "int8") so.matmul = oneinfer::MatMulPrecision::kInt8;
      auto s = oneinfer::Session::Load(path, so);
      if (s.ok()) session = std::move(*s); else load_error = std::string(s.status().message());
    }
  }
  *error = load_error;
  return session.get();
}

void BM_BatchDecodeStep(benchmark::State& state) {
  std::string error;
  const oneinfer::Session* session = LoadOnce(&error);
  if (session == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  const int batch = static_cast<int>(state.range(0));
  oneinfer::BatchOptions bo;
  bo.max_sequences = batch;
  auto gen = oneinfer::BatchGenerator::Create(*session, bo);
  if (!gen.ok()) {
    state.SkipWithError(std::string(gen.status().message()).c_str());
    return;
  }
  oneinfer::SequenceOptions so;
  so.max_new_tokens = 1 << 20;
  for (int b = 0; b < batch; ++b) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 32; ++i) prompt.push_back(1000 + 7 * b + i);
    if (!(*gen)->Add(prompt, so).ok()) state.SkipWithError("Add failed");
  }
  if (!(*gen)->Step().ok()) state.SkipWithError("prefill failed");  // every prompt, one pass
  for (auto _ : state) {
    auto events = (*gen)->Step();
    if (!events.ok()) {
      state.SkipWithError(std::string(events.status().message()).c_str());
      break;
    }
  }
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(batch) * static_cast<double>(state.iterations()),
                                                      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_BatchDecodeStep)->Arg(1)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond)->Iterations(24)->UseRealTime();

}  // namespace
