// Int8 GEMM throughput per tier at the Qwen3-0.6B projection shapes, beside the float
// SgemmPacked and the end-to-end dynamic A8W8 MatMul. GOP/s = 2*M*N*K / real time;
// GB/s = weight bytes streamed per call (K*N for int8, 4*K*N for float) / real time.
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "base/kernel_tier.h"
#include "base/thread_pool.h"
#include "ops/gemm/sgemm.h"
#include "quant/dynamic_a8w8.h"
#include "quant/gemm_s8.h"

namespace {

// args: M, K, N, threads.
struct Shape {
  int64_t M, K, N, threads;
  explicit Shape(const benchmark::State& s)
      : M(s.range(0)), K(s.range(1)), N(s.range(2)), threads(s.range(3)) {}
};

template <typename T>
std::vector<T> RandomInts(size_t n, int lo, int hi, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

std::vector<float> RandomFloats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::unique_ptr<oneinfer::ThreadPool> MakePool(int64_t threads) {
  return threads > 1 ? std::make_unique<oneinfer::ThreadPool>(static_cast<int>(threads)) : nullptr;
}

void SetCounters(benchmark::State& state, const Shape& s, int64_t weight_bytes_per_elem) {
  state.counters["GOP/s"] = benchmark::Counter(2e-9 * s.M * s.N * s.K,
                                               benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(1e-9 * weight_bytes_per_elem * s.K * s.N,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

// The int8 GEMM on one forced tier; A signed (s8s8, the +128 shift on VNNI) or unsigned.
template <typename A>
void BM_Int8(benchmark::State& state, const char* tier) {
  if (!oneinfer::SetKernelTier(oneinfer::KernelFamily::kInt8, tier)) {
    oneinfer::ResetKernelTier(oneinfer::KernelFamily::kInt8);
    state.SkipWithError("tier not supported on this CPU");
    return;
  }
  const Shape s(state);
  std::mt19937 rng(42);
  const std::vector<A> a = RandomInts<A>(s.M * s.K, std::is_signed_v<A> ? -128 : 0,
                                         std::is_signed_v<A> ? 127 : 255, rng);
  const std::vector<int8_t> w = RandomInts<int8_t>(s.K * s.N, -128, 127, rng);
  std::vector<int32_t> c(s.M * s.N);
  const auto packed = oneinfer::PackedWeightsS8::Pack(w.data(), s.K, s.N, s.N);
  auto pool = MakePool(s.threads);
  for (auto _ : state) {
    if constexpr (std::is_signed_v<A>)
      oneinfer::GemmS8S8S32(s.M, a.data(), s.K, packed, c.data(), s.N, pool.get());
    else
      oneinfer::GemmU8S8S32(s.M, a.data(), s.K, packed, c.data(), s.N, pool.get());
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, s, 1);
  state.SetLabel(oneinfer::Int8TierName());
  oneinfer::ResetKernelTier(oneinfer::KernelFamily::kInt8);
}

void BM_gemm_s8s8_s32(benchmark::State& state, const char* tier) { BM_Int8<int8_t>(state, tier); }
void BM_gemm_u8s8_s32(benchmark::State& state, const char* tier) { BM_Int8<uint8_t>(state, tier); }

// Decode as the model sees it: the layer's weights come from memory, not the caches. Cycles
// through enough copies of one K x N matrix (>= 256 MB) that none is cached when it is used
// again; the GB/s counter is then set against bench_membw's read bandwidth. Args: M, K, N, threads.
void BM_Int8Streamed(benchmark::State& state) {
  const Shape s(state);
  std::mt19937 rng(42);
  const std::vector<int8_t> a = RandomInts<int8_t>(s.M * s.K, -128, 127, rng);
  const std::vector<int8_t> w = RandomInts<int8_t>(s.K * s.N, -128, 127, rng);
  const int64_t copies = std::max<int64_t>(2, (int64_t{256} << 20) / (s.K * s.N));
  std::vector<oneinfer::PackedWeightsS8> packed;
  for (int64_t i = 0; i < copies; ++i) packed.push_back(oneinfer::PackedWeightsS8::Pack(w.data(), s.K, s.N, s.N));
  std::vector<int32_t> c(s.M * s.N);
  auto pool = MakePool(s.threads);
  size_t next = 0;
  for (auto _ : state) {
    oneinfer::GemmS8S8S32(s.M, a.data(), s.K, packed[next], c.data(), s.N, pool.get());
    next = (next + 1) % packed.size();
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, s, 1);
  state.SetLabel(oneinfer::Int8TierName());
}

// Float baseline: the packed float GEMM the MatMul op runs today.
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
  SetCounters(state, s, 4);
  state.SetLabel(oneinfer::SgemmTierName());
}

// Float in, float out through int8 on the default tier: quantise A, GEMM, dequantise.
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
  SetCounters(state, s, 1);
  state.SetLabel(oneinfer::Int8TierName());
}

// A decoder layer's projections that read one A, from memory as at decode: q, k and v (N 2048,
// 1024, 1024) or gate and up (3072, 3072) at K 1024, as separate MatMulA8W8 calls (grouped 0)
// or one MatMulA8W8Group (grouped 1). Cycles through >= 256 MB of weight sets so none is
// cached. Args: M, set (0 qkv, 1 gate/up), grouped, threads.
void BM_A8W8Projections(benchmark::State& state) {
  const int64_t M = state.range(0), K = 1024, threads = state.range(3);
  const bool grouped = state.range(2) != 0;
  const std::vector<int64_t> widths = state.range(1) == 0 ? std::vector<int64_t>{2048, 1024, 1024}
                                                          : std::vector<int64_t>{3072, 3072};
  int64_t n_total = 0;
  for (int64_t n : widths) n_total += n;
  std::mt19937 rng(42);
  const std::vector<float> a = RandomFloats(M * K, rng);
  std::vector<std::vector<float>> w;
  for (int64_t n : widths) w.push_back(RandomFloats(K * n, rng));
  const int64_t copies = std::max<int64_t>(2, (int64_t{256} << 20) / (K * n_total));
  std::vector<std::vector<oneinfer::A8W8Weights>> sets(copies);
  for (auto& set : sets) {
    for (size_t i = 0; i < widths.size(); ++i) set.push_back(oneinfer::A8W8Weights::FromFloat(w[i].data(), K, widths[i]));
  }
  std::vector<std::vector<float>> y;
  std::vector<float*> y_ptr;
  for (int64_t n : widths) y.emplace_back(M * n);
  for (auto& v : y) y_ptr.push_back(v.data());
  auto pool = MakePool(threads);
  size_t next = 0;
  for (auto _ : state) {
    const std::vector<oneinfer::A8W8Weights>& set = sets[next];
    if (grouped) {
      std::vector<const oneinfer::A8W8Weights*> ws;
      for (const auto& x : set) ws.push_back(&x);
      oneinfer::MatMulA8W8Group(M, a.data(), ws, y_ptr, pool.get());
    } else {
      for (size_t i = 0; i < set.size(); ++i) oneinfer::MatMulA8W8(M, a.data(), set[i], y_ptr[i], pool.get());
    }
    next = (next + 1) % sets.size();
    benchmark::DoNotOptimize(y_ptr.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(1e-9 * K * n_total, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(oneinfer::Int8TierName());
}

// The bound the int8 tiles are held to: one core's vpdpbusd zmm rate on 12 independent chains
// that never touch memory. G MAC/s = 64 multiply-adds per instruction.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void VpdpbusdLoop(benchmark::State& state) {
  __m512i acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
  __m512i a = _mm512_set1_epi32(0x01010101);
  const __m512i b = _mm512_set1_epi32(0x02020202);
  constexpr int64_t kRounds = 1 << 16;
  for (auto _ : state) {
    for (int64_t r = 0; r < kRounds; ++r) {
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
      __asm__ volatile("" : "+v"(a));  // a new a each round: the loop cannot be folded
    }
  }
  for (int i = 0; i < 12; ++i) benchmark::DoNotOptimize(acc[i]);
  state.counters["G MAC/s"] = benchmark::Counter(64e-9 * 12 * kRounds, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_VpdpbusdPeak(benchmark::State& state) {
  if (!oneinfer::SetKernelTier(oneinfer::KernelFamily::kInt8, "avx512vnni")) {
    oneinfer::ResetKernelTier(oneinfer::KernelFamily::kInt8);
    state.SkipWithError("no AVX-512 VNNI on this CPU");
    return;
  }
  oneinfer::ResetKernelTier(oneinfer::KernelFamily::kInt8);
  VpdpbusdLoop(state);
}

// Qwen3-0.6B projections: (K, N) at decode (M=1), small batch (16) and prefill (128).
void Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "K", "N", "threads"});
  for (int64_t m : {1, 16, 128})
    for (auto [k, n] : {std::pair<int64_t, int64_t>{1024, 2048}, {1024, 1024}, {2048, 1024},
                        {1024, 3072}, {3072, 1024}})
      for (int64_t t : {1, 2}) b->Args({m, k, n, t});
  b->UseRealTime();
}

BENCHMARK_CAPTURE(BM_gemm_s8s8_s32, reference, "reference")->Apply(Shapes);
BENCHMARK_CAPTURE(BM_gemm_s8s8_s32, avx2, "avx2")->Apply(Shapes);
BENCHMARK_CAPTURE(BM_gemm_s8s8_s32, avx512vnni, "avx512vnni")->Apply(Shapes);
// u8 activations skip the shift; only the VNNI tier treats them differently from s8.
BENCHMARK_CAPTURE(BM_gemm_u8s8_s32, avx512vnni, "avx512vnni")->Apply(Shapes);
BENCHMARK(BM_SgemmPacked)->Apply(Shapes);
BENCHMARK(BM_Int8Streamed)->ArgNames({"M", "K", "N", "threads"})
    ->ArgsProduct({{1, 4, 8, 16}, {1024}, {3072}, {2}})->Args({1, 3072, 1024, 2})->Args({16, 3072, 1024, 2})
    ->Args({16, 1024, 151936, 2})->Args({256, 1024, 3072, 2})  // Qwen3's LM head; a prefill of 256 rows
    ->UseRealTime();
BENCHMARK(BM_MatMulA8W8)->Apply(Shapes)->Args({16, 1024, 151936, 2});  // and Qwen3's LM head
BENCHMARK(BM_A8W8Projections)->ArgNames({"M", "set", "grouped", "threads"})
    ->ArgsProduct({{1, 16}, {0, 1}, {0, 1}, {2}})->UseRealTime();
BENCHMARK(BM_VpdpbusdPeak)->UseRealTime();

}  // namespace
