// QDQ MatMul groups (DequantizeLinear x2 -> MatMul -> QuantizeLinear) through a Session: the
// fused int8 node against the per-node path (SessionOptions::qdq_fusion = false), at
// 256x1024x1024 and the Qwen3-0.6B projection shapes at M = 1 and 32.
// Counters: peak_intermediate_bytes (the engine allocator's high-water mark of one run,
// deterministic) and rss_growth_kb (VmHWM after the timed runs minus VmRSS before them, with the
// kernel's peak reset through /proc/self/clear_refs; indicative, not a bound).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/session_impl.h"
#include "graph/onnx_loader.h"

namespace {

using namespace oneinfer;

Attribute IntAttr(const std::string& name, int64_t v) {
  Attribute a;
  a.name = name;
  a.type = Attribute::Type::kInt;
  a.i = v;
  return a;
}

Tensor RandomInt8(Shape s, uint32_t seed) {
  Tensor t = Tensor::Empty(DType::kInt8, s);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<int8_t>()[i] = static_cast<int8_t>(d(rng));
  return t;
}

Tensor Scalar(float v) { return Tensor::FromVector(DType::kFloat32, {}, std::vector<float>{v}); }
Tensor ScalarI8(int v) { return Tensor::FromVector(DType::kInt8, {}, std::vector<int8_t>{static_cast<int8_t>(v)}); }

// Quark's A8W8 form: per-tensor activation scale with a zero point, per-column weight scales.
std::unique_ptr<SessionImpl> MakeSession(int64_t M, int64_t K, int64_t N, bool fuse) {
  auto model = std::make_unique<Model>();
  Graph& g = model->graph;
  g.opsets[""] = 21;
  ValueInfo x;
  x.name = "x_q";
  x.type.kind = TypeInfo::Kind::kTensor;
  x.type.elem = DType::kInt8;
  x.type.shape = std::vector<Dim>{Dim{M, ""}, Dim{K, ""}};
  g.inputs.push_back(x);
  g.initializers["w_q"] = RandomInt8({K, N}, 2);
  std::vector<float> sw(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) sw[n] = 0.003f + 0.00001f * static_cast<float>(n % 97);
  g.initializers["s_w"] = Tensor::FromVector(DType::kFloat32, {N}, sw);
  g.initializers["s_x"] = Scalar(0.02f);
  g.initializers["zp_x"] = ScalarI8(-3);
  g.initializers["s_y"] = Scalar(0.02f * 0.003f * 32.f * 137.f);
  g.initializers["zp_y"] = ScalarI8(0);
  Node dqx, dqw, mm, q;
  dqx.op_type = dqw.op_type = "DequantizeLinear";
  dqx.inputs = {"x_q", "s_x", "zp_x"};
  dqx.outputs = {"x_dq"};
  dqw.inputs = {"w_q", "s_w"};
  dqw.outputs = {"w_dq"};
  dqw.attrs["axis"] = IntAttr("axis", 1);
  mm.op_type = "MatMul";
  mm.inputs = {"x_dq", "w_dq"};
  mm.outputs = {"y"};
  q.op_type = "QuantizeLinear";
  q.inputs = {"y", "s_y", "zp_y"};
  q.outputs = {"y_q"};
  g.nodes = {dqx, dqw, mm, q};
  g.outputs.push_back(ValueInfo{"y_q", {}});
  SessionOptions opts;
  opts.num_threads = 1;
  opts.qdq_fusion = fuse;
  // The per-node control without any weight-only DequantizeLinear fusion either.
  if (!fuse) setenv("ONEINFER_WEIGHT_FUSION", "0", 1);
  auto s = SessionImpl::Create(std::move(model), opts);
  if (!fuse) unsetenv("ONEINFER_WEIGHT_FUSION");
  return s.ok() ? std::move(*s) : nullptr;
}

long ProcStatusKb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::strlen(key)));
  }
  return -1;
}

// args: M, K, N, fused (1) or per node (0).
void BM_QdqMatMul(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  const bool fuse = state.range(3) != 0;
  auto s = MakeSession(M, K, N, fuse);
  if (!s) {
    state.SkipWithError("session failed to load");
    return;
  }
  std::vector<Feed> feeds{{"x_q", RandomInt8({M, K}, 1)}};
  if (!s->Run(feeds, {}).ok()) {
    state.SkipWithError("run failed");
    return;
  }
  s->allocator().ResetPeak();
  std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current RSS
  const long rss0 = ProcStatusKb("VmRSS:");
  for (auto _ : state) {
    auto out = s->Run(feeds, {});
    benchmark::DoNotOptimize(out);
  }
  state.counters["peak_intermediate_bytes"] = static_cast<double>(s->allocator().peak_bytes());
  state.counters["rss_growth_kb"] = static_cast<double>(ProcStatusKb("VmHWM:") - rss0);
  state.counters["GOP/s"] = benchmark::Counter(2.0 * M * K * N, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::OneK::kIs1000);
  state.SetLabel(fuse ? "fused" : "per-node");
}

void Args(benchmark::internal::Benchmark* b) {
  for (int fuse : {1, 0}) b->Args({256, 1024, 1024, fuse});
  for (int64_t m : {1, 32}) {
    for (auto [k, n] : {std::pair<int64_t, int64_t>{1024, 2048}, {1024, 1024}, {2048, 1024}, {1024, 3072}, {3072, 1024}}) {
      for (int fuse : {1, 0}) b->Args({m, k, n, fuse});
    }
  }
}

BENCHMARK(BM_QdqMatMul)->Apply(Args)->ArgNames({"M", "K", "N", "fused"})->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
