// Float GEMM throughput: oneinfer Sgemm / SgemmPacked vs Eigen's product on Qwen3-0.6B shapes.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <memory>
#include <random>
#include <vector>

#include "base/half.h"
#include "base/thread_pool.h"
#include "ops/gemm/sgemm.h"
#include "ops/op_util.h"

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

struct Operands {
  int64_t M, K, N;
  std::vector<float> a, b, c;
  Operands(int64_t m, int64_t k, int64_t n) : M(m), K(k), N(n), a(m * k), b(k * n), c(m * n) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& x : a) x = dist(rng);
    for (float& x : b) x = dist(rng);
  }
};

// args: M, K, N, threads.
Operands FromState(const benchmark::State& state) {
  return Operands(state.range(0), state.range(1), state.range(2));
}

void SetFlops(benchmark::State& state, const Operands& op) {
  state.counters["GFLOPS"] = benchmark::Counter(2e-9 * op.M * op.N * op.K,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

std::unique_ptr<oneinfer::ThreadPool> MakePool(int64_t threads) {
  return threads > 1 ? std::make_unique<oneinfer::ThreadPool>(static_cast<int>(threads)) : nullptr;
}

void BM_OneinferSgemm(benchmark::State& state) {
  Operands op = FromState(state);
  auto pool = MakePool(state.range(3));
  for (auto _ : state) {
    oneinfer::Sgemm(false, false, op.M, op.N, op.K, 1.0f, op.a.data(), op.K, op.b.data(), op.N,
                    0.0f, op.c.data(), op.N, pool.get());
    benchmark::DoNotOptimize(op.c.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, op);
  state.SetLabel(oneinfer::SgemmTierName());
}

void BM_OneinferSgemmPacked(benchmark::State& state) {
  Operands op = FromState(state);
  auto pool = MakePool(state.range(3));
  const auto packed = oneinfer::PackedMatrixB::Pack(false, op.K, op.N, op.b.data(), op.N);
  for (auto _ : state) {
    oneinfer::SgemmPacked(op.M, op.N, op.K, 1.0f, op.a.data(), op.K, packed, 0.0f, op.c.data(),
                          op.N, pool.get());
    benchmark::DoNotOptimize(op.c.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, op);
  state.SetLabel(oneinfer::SgemmTierName());
}

void BM_EigenProduct(benchmark::State& state) {
  Operands op = FromState(state);
#ifdef _OPENMP
  Eigen::setNbThreads(static_cast<int>(state.range(3)));
#endif
  Eigen::Map<const RowMajor> a(op.a.data(), op.M, op.K);
  Eigen::Map<const RowMajor> b(op.b.data(), op.K, op.N);
  Eigen::Map<RowMajor> c(op.c.data(), op.M, op.N);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(op.c.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, op);
#ifdef _OPENMP
  state.SetLabel("eigen openmp");
  Eigen::setNbThreads(1);
#else
  state.SetLabel("eigen single-thread (built without OpenMP)");
#endif
}

// Decode's case: packed weights cycled through 256 MB, so every call streams them from memory
// (the shapes above stay in the last-level cache). args: M, K, N, threads, half (float16 panels).
void BM_SgemmPackedStreamed(benchmark::State& state) {
  Operands op = FromState(state);
  auto pool = MakePool(state.range(3));
  const bool half = state.range(4) != 0;
  std::vector<uint16_t> b16(op.b.size());
  for (size_t i = 0; i < b16.size(); ++i) b16[i] = oneinfer::F32ToF16(op.b[i]);
  const int64_t bytes = op.K * op.N * (half ? 2 : 4);
  const int64_t copies = std::max<int64_t>(2, (int64_t{256} << 20) / bytes);
  std::vector<oneinfer::PackedMatrixB> packed;
  for (int64_t i = 0; i < copies; ++i) {
    packed.push_back(half ? oneinfer::PackedMatrixB::PackHalf(false, op.K, op.N, b16.data(), op.N)
                          : oneinfer::PackedMatrixB::Pack(false, op.K, op.N, op.b.data(), op.N));
  }
  size_t next = 0;
  for (auto _ : state) {
    oneinfer::SgemmPacked(op.M, op.N, op.K, 1.0f, op.a.data(), op.K, packed[next], 0.0f, op.c.data(), op.N,
                          pool.get());
    next = (next + 1) % packed.size();
    benchmark::DoNotOptimize(op.c.data());
    benchmark::ClobberMemory();
  }
  SetFlops(state, op);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(half ? "float16 panels" : "float32 panels");
}

// Qwen3-0.6B projections: (K, N) pairs at decode (M=1), small batch (16) and prefill (128).
void Shapes(benchmark::internal::Benchmark* b, bool threaded) {
  b->ArgNames({"M", "K", "N", "threads"});
  for (int64_t m : {1, 16, 128})
    for (auto [k, n] : {std::pair<int64_t, int64_t>{1024, 2048}, {1024, 1024}, {2048, 1024},
                        {1024, 3072}, {3072, 1024}})
      for (int64_t t : {1, 2})
        if (t == 1 || threaded) b->Args({m, k, n, t});
  b->UseRealTime();
}

void ThreadedShapes(benchmark::internal::Benchmark* b) { Shapes(b, true); }
void EigenShapes(benchmark::internal::Benchmark* b) {
#ifdef _OPENMP
  Shapes(b, true);
#else
  Shapes(b, false);  // Eigen can only thread its product through OpenMP.
#endif
}

BENCHMARK(BM_OneinferSgemm)->Apply(ThreadedShapes);
BENCHMARK(BM_OneinferSgemmPacked)->Apply(ThreadedShapes);
BENCHMARK(BM_EigenProduct)->Apply(EigenShapes);
BENCHMARK(BM_SgemmPackedStreamed)->ArgNames({"M", "K", "N", "threads", "half"})
    ->ArgsProduct({{1, 4}, {1024}, {3072}, {1, 2}, {0, 1}})->Args({1, 1024, 151936, 2, 1})->UseRealTime();

// A batched decode step's attention (the SoftmaxAttention node's products and softmax rows,
// ops/fused.cc): 16 sequences x 28 layers, each 8 KV heads of two query rows (grouped-query)
// against T cached keys and values of 128, in blocks of 128 positions. What it reads (every K
// and V once, ~3.7 MB per position a step) comes from memory: compare GB/s with bench_membw.
// args: T, threads.
void BM_DecodeAttentionProducts(benchmark::State& state) {
  constexpr int64_t kCalls = 16 * 28, kHeads = 8, kD = 128, kCap = 128, kRows = 2;
  const int64_t T = state.range(0);
  auto pool = MakePool(state.range(1));
  std::vector<float> kv(static_cast<size_t>(kCalls * kHeads * kCap * kD * 2), 0.01f);
  std::vector<float> q(static_cast<size_t>(kCalls * kHeads * kRows * kD), 0.02f);
  std::vector<float> out(q.size());
  for (auto _ : state) {
    oneinfer::ParallelFor(pool.get(), kCalls, 1, [&](int64_t c0, int64_t c1) {
      std::vector<float> s(static_cast<size_t>(kRows * T));
      for (int64_t c = c0; c < c1; ++c) {
        for (int64_t h = 0; h < kHeads; ++h) {
          const int64_t m = c * kHeads + h;
          const float* k = kv.data() + m * 2 * kCap * kD;
          const float* v = k + kCap * kD;
          oneinfer::Sgemm(false, true, kRows, T, kD, 0.088f, q.data() + m * kRows * kD, kD, k, kD, 0.0f, s.data(), T,
                          nullptr);
          for (int64_t r = 0; r < kRows; ++r) oneinfer::SoftmaxRowF32(s.data() + r * T, s.data() + r * T, T);
          oneinfer::Sgemm(false, false, kRows, kD, T, 1.0f, s.data(), T, v, kD, 0.0f, out.data() + m * kRows * kD, kD,
                          nullptr);
        }
      }
    });
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(kCalls * kHeads * T * kD * 2 * 4),
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_DecodeAttentionProducts)->ArgNames({"T", "threads"})->ArgsProduct({{32, 64, 128}, {1, 2}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
