// 4-bit weight GEMM (MatMulQ4: float in, float out, q8 block activations) per tier at the
// Qwen3-0.6B shapes including lm_head, beside the dynamic A8W8 MatMul and the packed float
// GEMM. GOP/s = 2*M*N*K / real time; GB/s = packed weight bytes per call / real time
// (4-bit: codes + per-block float16 d, m; int8: K*N; float: 4*K*N).
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "base/kernel_tier.h"
#include "base/thread_pool.h"
#include "ops/gemm/sgemm.h"
#include "quant/dynamic_a8w8.h"
#include "quant/gemm_q4.h"

namespace {

// args: M, K, N, threads.
struct Shape {
  int64_t M, K, N, threads;
  explicit Shape(const benchmark::State& s)
      : M(s.range(0)), K(s.range(1)), N(s.range(2)), threads(s.range(3)) {}
};

std::vector<float> RandomFloats(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::unique_ptr<oneinfer::ThreadPool> MakePool(int64_t threads) {
  return threads > 1 ? std::make_unique<oneinfer::ThreadPool>(static_cast<int>(threads)) : nullptr;
}

void SetCounters(benchmark::State& state, const Shape& s, double weight_bytes) {
  state.counters["GOP/s"] = benchmark::Counter(2e-9 * s.M * s.N * s.K,
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(1e-9 * weight_bytes,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// MatMulQ4 on one forced tier.
void BM_gemm_q4b32_q8_f32(benchmark::State& state, const char* tier) {
  if (!oneinfer::SetKernelTier(oneinfer::KernelFamily::kQ4, tier)) {
    oneinfer::ResetKernelTier(oneinfer::KernelFamily::kQ4);
    state.SkipWithError("tier not supported on this CPU");
    return;
  }
  const Shape s(state);
  std::mt19937 rng(42);
  const std::vector<float> a = RandomFloats(s.M * s.K, rng);
  std::vector<float> y(s.M * s.N);
  // Random codes and scales, generated panel by panel so lm_head needs no N x K staging copy.
  auto fill = [K = s.K](int64_t n0, int64_t n1, uint8_t* codes, float* d, float* m) {
    std::mt19937 r(static_cast<uint32_t>(n0));
    for (int64_t i = 0; i < (n1 - n0) * K; ++i) codes[i] = r() & 15;
    // Float16-exact scales: the layout export-qwen3 --weights int4 gets (0.625 bytes per weight).
    for (int64_t i = 0; i < (n1 - n0) * K / 32; ++i) d[i] = 0.0078125f, m[i] = -0.0625f;
    return absl::OkStatus();
  };
  auto pool = MakePool(s.threads);
  auto packed = oneinfer::PackedWeightsQ4::PackWith(s.K, s.N, fill, pool.get(),
                                                    oneinfer::Q4ScaleFormat::kF16);
  if (!packed.ok()) {
    state.SkipWithError("pack failed");
    return;
  }
  for (auto _ : state) {
    oneinfer::MatMulQ4(s.M, a.data(), *packed, y.data(), pool.get());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, s, static_cast<double>(packed->bytes()));
  state.SetLabel(oneinfer::Q4TierName());
  oneinfer::ResetKernelTier(oneinfer::KernelFamily::kQ4);
}

// Float in, float out through int8 (the --weights int8 path): quantise A per row, GEMM, scale.
void BM_MatMulA8W8(benchmark::State& state) {
  const Shape s(state);
  std::mt19937 rng(42);
  const std::vector<float> a = RandomFloats(s.M * s.K, rng), w = RandomFloats(s.K * s.N, rng);
  std::vector<float> y(s.M * s.N);
  const auto packed = oneinfer::A8W8Weights::FromFloat(w.data(), s.K, s.N);
  auto pool = MakePool(s.threads);
  for (auto _ : state) {
    oneinfer::MatMulA8W8(s.M, a.data(), packed, y.data(), pool.get());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, s, static_cast<double>(s.K) * s.N);
}

void BM_SgemmPacked(benchmark::State& state) {
  const Shape s(state);
  std::mt19937 rng(42);
  const std::vector<float> a = RandomFloats(s.M * s.K, rng), b = RandomFloats(s.K * s.N, rng);
  std::vector<float> c(s.M * s.N);
  const auto packed = oneinfer::PackedMatrixB::Pack(false, s.K, s.N, b.data(), s.N);
  auto pool = MakePool(s.threads);
  for (auto _ : state) {
    oneinfer::SgemmPacked(s.M, s.N, s.K, 1.0f, a.data(), s.K, packed, 0.0f, c.data(), s.N,
                          pool.get());
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, s, 4.0 * s.K * s.N);
}

// Qwen3-0.6B: the projections and lm_head (1024, 151936) at M = 1, 16, 128, 1 and 2 threads.
void Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "K", "N", "threads"});
  for (int64_t m : {1, 16, 128})
    for (auto [k, n] : {std::pair<int64_t, int64_t>{1024, 2048}, {1024, 1024}, {2048, 1024},
                        {1024, 3072}, {3072, 1024}, {1024, 151936}})
      for (int64_t t : {1, 2}) b->Args({m, k, n, t});
  b->UseRealTime();
}

// The scalar tier only at decode: it is the oracle, not a contender.
void DecodeShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "K", "N", "threads"});
  for (auto [k, n] : {std::pair<int64_t, int64_t>{1024, 2048}, {1024, 1024}, {2048, 1024},
                      {1024, 3072}, {3072, 1024}, {1024, 151936}})
    b->Args({1, k, n, 2});
  b->UseRealTime();
}

BENCHMARK_CAPTURE(BM_gemm_q4b32_q8_f32, reference, "reference")->Apply(DecodeShapes);
BENCHMARK_CAPTURE(BM_gemm_q4b32_q8_f32, avx2, "avx2")->Apply(Shapes);
BENCHMARK_CAPTURE(BM_gemm_q4b32_q8_f32, avx512vnni, "avx512vnni")->Apply(Shapes);
BENCHMARK(BM_MatMulA8W8)->Apply(Shapes);
BENCHMARK(BM_SgemmPacked)->Apply(Shapes);

}  // namespace
