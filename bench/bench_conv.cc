// Float Conv throughput on the shapes PP-OCRv4 det spends its time in: ConvFloat2D (im2col tiles
// through the packed GEMM, pointwise, depthwise) beside the plain reference (one output at a time).
// args: C, H (= W), M, kernel, stride, group, threads.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "ops/conv_kernels.h"

namespace {

struct Problem {
  oneinfer::Conv2DParams p;
  std::vector<float> x, w, b, y;
  explicit Problem(const benchmark::State& s) {
    p.C = s.range(0), p.H = p.W = s.range(1), p.M = s.range(2), p.KH = p.KW = s.range(3);
    p.SH = p.SW = s.range(4), p.G = s.range(5);
    p.PT = p.PL = p.KH / 2;
    p.OH = (p.H + 2 * p.PT - p.KH) / p.SH + 1, p.OW = (p.W + 2 * p.PL - p.KW) / p.SW + 1;
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    x.resize(p.N * p.C * p.H * p.W);
    w.resize(p.M * (p.C / p.G) * p.KH * p.KW);
    b.resize(p.M);
    y.resize(p.N * p.M * p.OH * p.OW);
    for (auto* v : {&x, &w, &b})
      for (float& e : *v) e = dist(rng);
  }
  double flops() const { return 2.0 * p.N * p.M * p.OH * p.OW * (p.C / p.G) * p.KH * p.KW; }
};

void SetCounters(benchmark::State& state, const Problem& pr) {
  state.counters["GFLOPS"] = benchmark::Counter(1e-9 * pr.flops(), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(oneinfer::ConvFloat2DPath(pr.p));
}

void BM_ConvFloat2D(benchmark::State& state) {
  Problem pr(state);
  const int threads = static_cast<int>(state.range(6));
  auto pool = threads > 1 ? std::make_unique<oneinfer::ThreadPool>(threads) : nullptr;
  oneinfer::ConvActivation act;
  act.kind = oneinfer::ConvActivation::Kind::kHardSwish;
  for (auto _ : state) {
    oneinfer::ConvFloat2D(pr.p, pr.x.data(), pr.w.data(), pr.b.data(), act, pr.y.data(), pool.get());
    benchmark::DoNotOptimize(pr.y.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, pr);
}

// The same with the weights packed at load: small outputs take the transposed product.
void BM_ConvFloat2DPacked(benchmark::State& state) {
  Problem pr(state);
  const int threads = static_cast<int>(state.range(6));
  auto pool = threads > 1 ? std::make_unique<oneinfer::ThreadPool>(threads) : nullptr;
  const auto packed = oneinfer::PackConvWeights(pr.p.M, pr.p.G, pr.p.C / pr.p.G * pr.p.KH * pr.p.KW, pr.w.data());
  oneinfer::ConvActivation act;
  act.kind = oneinfer::ConvActivation::Kind::kHardSwish;
  for (auto _ : state) {
    oneinfer::ConvFloat2D(pr.p, pr.x.data(), pr.w.data(), pr.b.data(), act, pr.y.data(), pool.get(), &packed);
    benchmark::DoNotOptimize(pr.y.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, pr);
  state.SetLabel(oneinfer::ConvFloat2DPath(pr.p, true));
}

void BM_ConvFloat2DReference(benchmark::State& state) {
  Problem pr(state);
  oneinfer::ConvActivation act;
  act.kind = oneinfer::ConvActivation::Kind::kHardSwish;
  for (auto _ : state) {
    oneinfer::ConvFloat2DReference(pr.p, pr.x.data(), pr.w.data(), pr.b.data(), act, pr.y.data());
    benchmark::DoNotOptimize(pr.y.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, pr);
}

// C, H, M, kernel, stride, group: det's 3x3 96 -> 24 at 80x80 (the example), a 1x1
// 192 -> 192 at 20x20, depthwise 3x3 stride 2 at 80x80 and 5x5 at 20x20, the 3 -> 16 stem.
void Shapes(benchmark::internal::Benchmark* b, bool threads2) {
  for (const auto& s : std::vector<std::vector<int64_t>>{{96, 80, 24, 3, 1, 1},
                                                         {192, 20, 192, 1, 1, 1},
                                                         {48, 80, 48, 3, 2, 48},
                                                         {192, 20, 192, 5, 1, 192},
                                                         {3, 320, 16, 3, 2, 1},
                                                         // small outputs: det's 10x10 and 8x8 ends
                                                         {96, 10, 96, 3, 1, 1},
                                                         {256, 8, 128, 1, 1, 1},
                                                         {128, 4, 128, 3, 1, 1}}) {
    auto args = s;
    args.push_back(1);
    b->Args(args);
    if (threads2) {
      args.back() = 2;
      b->Args(args);
    }
  }
  b->ArgNames({"C", "H", "M", "k", "s", "g", "t"});
}

BENCHMARK(BM_ConvFloat2D)->Apply([](benchmark::internal::Benchmark* b) { Shapes(b, true); })->UseRealTime();
BENCHMARK(BM_ConvFloat2DPacked)->Apply([](benchmark::internal::Benchmark* b) { Shapes(b, true); })->UseRealTime();
BENCHMARK(BM_ConvFloat2DReference)->Apply([](benchmark::internal::Benchmark* b) { Shapes(b, false); })->UseRealTime();

}  // namespace
