// com.microsoft MatMulNBits: the kernel (4-bit weights repacked onto the 4-bit GEMM at load) run
// through a one-node session, beside the float reference (MatMulNBitsReference: dequantise and
// multiply in double) on the same weights. Args: M, K, N, block_size, threads (the reference is
// single-threaded). GOP/s = 2*M*N*K / real time.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "engine/session_impl.h"
#include "graph/ir.h"
#include "oneinfer/session.h"
#include "ops/contrib_matmul_nbits.h"

namespace {

using oneinfer::DType;
using oneinfer::Tensor;

struct Weights {
  Tensor blob, scales, a;
};

Weights MakeWeights(int64_t M, int64_t K, int64_t N, int64_t bs) {
  std::mt19937 rng(1);
  const int64_t blocks = (K + bs - 1) / bs;
  Weights w;
  w.blob = Tensor::Empty(DType::kUInt8, {N, blocks, bs / 2});
  for (int64_t i = 0; i < w.blob.num_elements(); ++i) w.blob.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> us(0.002f, 0.02f), ua(-1.f, 1.f);
  std::vector<float> s(N * blocks), a(M * K);
  for (float& v : s) v = us(rng);
  for (float& v : a) v = ua(rng);
  w.scales = Tensor::FromVector(DType::kFloat32, {N * blocks}, s);
  w.a = Tensor::FromVector(DType::kFloat32, {M, K}, a);
  return w;
}

void SetCounters(benchmark::State& state, int64_t M, int64_t K, int64_t N) {
  state.counters["GOP/s"] = benchmark::Counter(2e-9 * M * N * K, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_MatMulNBits_Kernel(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2), bs = state.range(3);
  Weights w = MakeWeights(M, K, N, bs);
  auto model = std::make_unique<oneinfer::Model>();
  oneinfer::Graph& g = model->graph;
  g.name = "bench";
  g.opsets[""] = 21;
  g.opsets["com.microsoft"] = 1;
  g.initializers["B"] = w.blob;
  g.initializers["scales"] = w.scales;
  oneinfer::TypeInfo f32;
  f32.kind = oneinfer::TypeInfo::Kind::kTensor;
  f32.elem = DType::kFloat32;
  g.inputs.push_back(oneinfer::ValueInfo{"A", f32});
  g.outputs.push_back(oneinfer::ValueInfo{"Y", f32});
  oneinfer::Node n;
  n.name = "mmnb";
  n.op_type = "MatMulNBits";
  n.domain = "com.microsoft";
  n.inputs = {"A", "B", "scales"};
  n.outputs = {"Y"};
  for (auto [name, v] : {std::pair<const char*, int64_t>{"K", K}, {"N", N}, {"bits", 4}, {"block_size", bs}}) {
    oneinfer::Attribute at;
    at.name = name;
    at.type = oneinfer::Attribute::Type::kInt;
    at.i = v;
    n.attrs[name] = at;
  }
  g.nodes.push_back(std::move(n));
  oneinfer::SessionOptions opts;
  opts.num_threads = static_cast<int>(state.range(4));
  auto session = oneinfer::SessionImpl::Create(std::move(model), opts);
  if (!session.ok()) {
    state.SkipWithError(std::string(session.status().message()).c_str());
    return;
  }
  const std::vector<std::pair<std::string, oneinfer::Value>> feeds = {{"A", oneinfer::Value::FromTensor(w.a)}};
  for (auto _ : state) {
    auto y = (*session)->RunValues(feeds);
    benchmark::DoNotOptimize(y);
  }
  SetCounters(state, M, K, N);
}

void BM_MatMulNBits_Reference(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2), bs = state.range(3);
  Weights w = MakeWeights(M, K, N, bs);
  auto nb = oneinfer::CheckNBitsWeights("bench", K, N, 4, bs, w.blob, w.scales, nullptr);
  if (!nb.ok()) {
    state.SkipWithError(std::string(nb.status().message()).c_str());
    return;
  }
  std::vector<float> y(M * N);
  for (auto _ : state) {
    oneinfer::MatMulNBitsReference(M, w.a.data<float>(), *nb, nullptr, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, M, K, N);
}

// Qwen3-0.6B projection shapes (K x N = 1024 x 2048, 3072 x 1024), decode and a 16-token prompt.
void Args(benchmark::internal::Benchmark* b, bool threads) {
  b->ArgNames({"M", "K", "N", "bs", "threads"});
  for (int64_t M : {1, 16})
    for (auto [K, N] : {std::pair<int64_t, int64_t>{1024, 2048}, {3072, 1024}})
      for (int64_t bs : {16, 32, 128})
        for (int64_t t : threads ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1}) b->Args({M, K, N, bs, t});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(BM_MatMulNBits_Kernel)->Apply([](benchmark::internal::Benchmark* b) { Args(b, true); });
BENCHMARK(BM_MatMulNBits_Reference)->Apply([](benchmark::internal::Benchmark* b) { Args(b, false); });

}  // namespace
