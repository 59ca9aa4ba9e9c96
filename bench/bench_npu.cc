// The device leg's per-call accounting, before hardware exists: every section of a device call
// (weight pack + upload, activation write + flush, launch + wait, readback, epilogue) under the
// emulated device, beside the host reference loop at the same Qwen3-0.6B shapes.
//
// Under emulation "launch" is the host computing the design's full padded M, so its absolute time
// says nothing about the NPU; the other sections are the real shared code's cost (on XRT they add
// the bo syncs). Run: build/bench_npu --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "npu/router.h"
#include "quant/dynamic_a8w8.h"

namespace {

using oneinfer::npu::Router;
using oneinfer::npu::Sections;

// Host reference: int8 x int8 -> int32, row by row (k outer so the inner loop vectorizes).
void HostReferenceGemm(int64_t M, int64_t K, int64_t N, const int8_t* a, const int8_t* w,
                       int32_t* c) {
  for (int64_t m = 0; m < M; ++m) {
    int32_t* crow = c + m * N;
    std::fill(crow, crow + N, 0);
    for (int64_t k = 0; k < K; ++k) {
      const int32_t av = a[m * K + k];
      const int8_t* wrow = w + k * N;
      for (int64_t n = 0; n < N; ++n) crow[n] += av * int32_t{wrow[n]};
    }
  }
}

// The epilogue a fused QDQ node runs on the accumulators: per-row x per-column scale to float.
void Epilogue(int64_t M, int64_t N, const int32_t* c, const float* row_scale,
              const float* col_scale, float* y) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) y[m * N + n] = float(c[m * N + n]) * row_scale[m] * col_scale[n];
}

struct Operands {
  int64_t M, K, N;
  std::vector<int8_t> a, w;
  std::vector<int32_t> c;
  std::vector<float> row_scale, col_scale, y;
  Operands(int64_t m, int64_t k, int64_t n)
      : M(m), K(k), N(n), a(m * k), w(k * n), c(m * n), row_scale(m, 0.02f),
        col_scale(n, 0.01f), y(m * n) {
    std::mt19937 rng(42);
    std::uniform_int_distribution<int> dist(-128, 127);
    for (auto& x : a) x = static_cast<int8_t>(dist(rng));
    for (auto& x : w) x = static_cast<int8_t>(dist(rng));
  }
};

// One emulated design per (K, N) at M = 32 and M = 128: 16 rows pad to 32, 128 rows fit exactly.
std::string DesignTable(int64_t K, int64_t N) {
  const std::string dir = "/tmp/oneinfer_bench_npu_";  // overwritten by every run
  const std::string xclbin = dir + "design.xclbin", insts = dir + "design.txt";
  std::ofstream(xclbin, std::ios::binary) << "xclbin2 (emulated: not parsed)";
  std::ofstream(insts) << "06030100\n00000105\n";
  return absl::StrCat("32x", K, "x", N, "=", xclbin, ":", insts, ",128x", K, "x", N, "=", xclbin,
                      ":", insts);
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SetSectionCounters(benchmark::State& state, const Sections& s) {
  const auto per_call = benchmark::Counter::kAvgIterations;
  state.counters["weight_us"] = benchmark::Counter(s.weight_ns / 1e3, per_call);
  state.counters["act_us"] = benchmark::Counter(s.activation_ns / 1e3, per_call);
  state.counters["launch_us"] = benchmark::Counter(s.launch_ns / 1e3, per_call);
  state.counters["readback_us"] = benchmark::Counter(s.readback_ns / 1e3, per_call);
  state.counters["epilogue_us"] = benchmark::Counter(s.epilogue_ns / 1e3, per_call);
  state.counters["launches"] = benchmark::Counter(static_cast<double>(s.launches), per_call);
}

// args: M, K, N. Steady state: the weight is uploaded in the untimed warm-up call.
void BM_NpuEmulatedCall(benchmark::State& state) {
  Operands op(state.range(0), state.range(1), state.range(2));
  Router router(DesignTable(op.K, op.N), [] {
    return absl::StatusOr<std::unique_ptr<oneinfer::npu::Device>>(
        oneinfer::npu::MakeEmulatedDevice());
  });
  auto call = [&](Sections* s) {
    if (!router.RunGemmS8(op.M, op.K, op.N, op.a.data(), op.w.data(), op.c.data(),
                          HostReferenceGemm, s)
             .ok()) {
      state.SkipWithError("RunGemmS8 failed");
    }
    const int64_t t0 = NowNs();
    Epilogue(op.M, op.N, op.c.data(), op.row_scale.data(), op.col_scale.data(), op.y.data());
    s->epilogue_ns += NowNs() - t0;
  };
  Sections warmup;
  call(&warmup);
  Sections total;
  for (auto _ : state) call(&total);
  if (router.counters().device != state.iterations() + 1) state.SkipWithError("not on device");
  SetSectionCounters(state, total);
  state.counters["first_weight_us"] = warmup.weight_ns / 1e3;
}

// args: M, K, N. The first call for a weight: pack + upload included every iteration.
void BM_NpuEmulatedWeightUpload(benchmark::State& state) {
  Operands op(state.range(0), state.range(1), state.range(2));
  Router router(DesignTable(op.K, op.N), [] {
    return absl::StatusOr<std::unique_ptr<oneinfer::npu::Device>>(
        oneinfer::npu::MakeEmulatedDevice());
  });
  Sections total;
  for (auto _ : state) {
    router.ForgetWeight(op.w.data());
    if (!router.RunGemmS8(op.M, op.K, op.N, op.a.data(), op.w.data(), op.c.data(),
                          HostReferenceGemm, &total)
             .ok()) {
      state.SkipWithError("RunGemmS8 failed");
    }
  }
  SetSectionCounters(state, total);
}

// args: M, K, N. The host reference plus the same epilogue.
void BM_HostReference(benchmark::State& state) {
  Operands op(state.range(0), state.range(1), state.range(2));
  int64_t epilogue_ns = 0;
  for (auto _ : state) {
    HostReferenceGemm(op.M, op.K, op.N, op.a.data(), op.w.data(), op.c.data());
    const int64_t t0 = NowNs();
    Epilogue(op.M, op.N, op.c.data(), op.row_scale.data(), op.col_scale.data(), op.y.data());
    epilogue_ns += NowNs() - t0;
    benchmark::DoNotOptimize(op.y.data());
  }
  state.counters["epilogue_us"] =
      benchmark::Counter(epilogue_ns / 1e3, benchmark::Counter::kAvgIterations);
}

// Qwen3-0.6B projections (K, N) at M = 16, 32, 128.
void Qwen3Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "K", "N"});
  for (int64_t m : {16, 32, 128})
    for (auto [k, n] : {std::pair<int64_t, int64_t>{1024, 2048}, {1024, 1024}, {2048, 1024},
                        {1024, 3072}, {3072, 1024}})
      b->Args({m, k, n});
  b->Unit(benchmark::kMicrosecond);
}

// args: M, K, N, route. The A8W8 MatMul (float in, float out) with the router in four states:
// 0 = no router (the weight made without one: what a session's kernels get when
// SessionOptions::npu names no design), 1 = a router without designs (not consulted), 2 = a router with a design for another
// shape only (consulted, host GEMM, npu_qdq_fallback / host_rows accounting), 3 = an emulated
// design for this shape (the device at M >= 16). 0 vs 1 is the router's cost on the host-only
// path; 1 vs 2 is the cost of consulting it.
void BM_A8W8Routed(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  const int64_t route = state.range(3);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> a(M * K), w(K * N), y(M * N);
  for (float& x : a) x = dist(rng);
  for (float& x : w) x = dist(rng);
  auto opener = [] {
    return absl::StatusOr<std::unique_ptr<oneinfer::npu::Device>>(
        oneinfer::npu::MakeEmulatedDevice());
  };
  const std::string table = route == 2 ? DesignTable(K, N + 16) : route == 3 ? DesignTable(K, N) : "";
  Router router(table, opener);
  const auto weights = oneinfer::A8W8Weights::FromFloat(w.data(), K, N, route == 0 ? nullptr : &router);
  oneinfer::MatMulA8W8(M, a.data(), weights, y.data(), nullptr);  // warm-up: uploads the weight
  for (auto _ : state) {
    oneinfer::MatMulA8W8(M, a.data(), weights, y.data(), nullptr);
    benchmark::DoNotOptimize(y.data());
  }
  const oneinfer::npu::RouterCounters c = router.counters();
  state.counters["device_calls"] = static_cast<double>(c.device);
  state.counters["host_calls"] = static_cast<double>(c.host_rows + c.fallback);
}

BENCHMARK(BM_A8W8Routed)
    ->ArgNames({"M", "K", "N", "route"})
    ->ArgsProduct({{1, 16}, {1024}, {1024, 3072}, {0, 1, 2, 3}})
    ->Unit(benchmark::kMicrosecond);

BENCHMARK(BM_NpuEmulatedCall)->Apply(Qwen3Shapes);
BENCHMARK(BM_HostReference)->Apply(Qwen3Shapes);
BENCHMARK(BM_NpuEmulatedWeightUpload)
    ->ArgNames({"M", "K", "N"})
    ->Args({32, 1024, 3072})
    ->Args({32, 3072, 1024})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
