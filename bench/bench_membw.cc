// Read bandwidth of this machine: the denominator of the memory-bandwidth bound that the
// model-level benchmarks print (decoding streams every weight once per token).
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdlib>
#include <cstring>

#include "base/thread_pool.h"

namespace {

// Sums 64-byte lines so the loads cannot be skipped; AVX-512 when the CPU has it.
__attribute__((target("avx512f"))) float SumAvx512(const float* p, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  for (int64_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

float SumPortable(const float* p, int64_t n) {
  float s[16] = {};
  for (int64_t i = 0; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) s[j] += p[i + j];
  float t = 0;
  for (float v : s) t += v;
  return t;
}

void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t bytes = int64_t{1} << 30;  // far beyond any cache
  const int64_t n = bytes / 4;
  auto* p = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(bytes)));
  std::memset(p, 1, static_cast<size_t>(bytes));
  oneinfer::ThreadPool pool(threads);
  const bool avx512 = __builtin_cpu_supports("avx512f");
  for (auto _ : state) {
    float total = 0;
    pool.ParallelFor(n, 1 << 20, [&](int64_t b, int64_t e) {
      const float s = avx512 ? SumAvx512(p + b, e - b) : SumPortable(p + b, e - b);
      benchmark::DoNotOptimize(s);
    });
    benchmark::DoNotOptimize(total);
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
  std::free(p);
}
BENCHMARK(BM_ReadBandwidth)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
