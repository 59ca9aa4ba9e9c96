// Dynamic A8W8: per-row activation and per-column weight quantisation around the int8 GEMM.
#include "quant/dynamic_a8w8.h"

#include <algorithm>
#include <cmath>

#include "engine/thread_pool.h"

namespace oneinfer {
namespace {

constexpr float kQMax = 127.0f;

// round-half-to-even(x / scale) in [-127, 127]; nearbyint rounds to even in the default
// floating-point environment, which the engine never changes.
inline int8_t QuantizeOne(float x, float scale) {
  const float q = std::nearbyint(x / scale);
  return static_cast<int8_t>(std::clamp(q, -kQMax, kQMax));
}

// Per-thread scratch for the quantised activations, their scales and the int32 product.
struct A8W8Scratch {
  std::vector<int8_t> q;
  std::vector<float> scales;
  std::vector<int32_t> acc;
};

}  // namespace

void QuantizeRowsS8(int64_t M, int64_t K, const float* x, int64_t ldx, int8_t* q, int64_t ldq,
                    float* scales) {
  for (int64_t i = 0; i < M; ++i) {
    const float* xr = x + i * ldx;
    int8_t* qr = q + i * ldq;
    float amax = 0.0f;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(xr[k]));
    const float scale = amax / kQMax;
    scales[i] = scale;
    if (scale == 0.0f) {
      std::fill(qr, qr + K, int8_t{0});
      continue;
    }
    for (int64_t k = 0; k < K; ++k) qr[k] = QuantizeOne(xr[k], scale);
  }
}

A8W8Weights A8W8Weights::FromFloat(const float* w, int64_t K, int64_t N) {
  A8W8Weights out;
  out.scales_.assign(std::max<int64_t>(0, N), 0.0f);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      out.scales_[n] = std::max(out.scales_[n], std::fabs(w[k * N + n]));
  for (float& s : out.scales_) s /= kQMax;
  // The int8 copy lives only until it is packed.
  std::vector<int8_t> q(static_cast<size_t>(std::max<int64_t>(0, K * N)));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      q[k * N + n] = out.scales_[n] == 0.0f ? 0 : QuantizeOne(w[k * N + n], out.scales_[n]);
  out.packed_ = PackedWeightsS8::Pack(q.data(), K, N, N);
  return out;
}

A8W8Weights A8W8Weights::FromFloatTransposed(const float* w, int64_t K, int64_t N) {
  A8W8Weights out;
  out.scales_.assign(std::max<int64_t>(0, N), 0.0f);
  std::vector<int8_t> q(static_cast<size_t>(std::max<int64_t>(0, K * N)));
  // Row n of w is output column n: quantising it is QuantizeRowsS8 on an [N, K] matrix.
  QuantizeRowsS8(N, K, w, K, q.data(), K, out.scales_.data());
  out.packed_ = PackedWeightsS8::PackTransposed(q.data(), K, N, K);
  return out;
}

void MatMulA8W8(int64_t M, const float* a, const A8W8Weights& w, float* y, ThreadPool* pool) {
  const int64_t K = w.K(), N = w.N();
  if (M <= 0 || N <= 0) return;
  thread_local A8W8Scratch s;
  if (static_cast<int64_t>(s.q.size()) < M * K) s.q.resize(M * K);
  if (static_cast<int64_t>(s.scales.size()) < M) s.scales.resize(M);
  if (static_cast<int64_t>(s.acc.size()) < M * N) s.acc.resize(M * N);
  int8_t* q = s.q.data();
  float* sa = s.scales.data();
  int32_t* acc = s.acc.data();
  const int64_t rows_per_chunk = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, K));
  ParallelFor(pool, M, rows_per_chunk, [&](int64_t m0, int64_t m1) {
    QuantizeRowsS8(m1 - m0, K, a + m0 * K, K, q + m0 * K, K, sa + m0);
  });
  GemmS8S8S32(M, q, K, w.packed(), acc, N, pool);
  const float* sw = w.scales();
  const int64_t dq_rows = std::max<int64_t>(1, (int64_t{1} << 15) / N);
  ParallelFor(pool, M, dq_rows, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const int32_t* cr = acc + m * N;
      float* yr = y + m * N;
      const float s = sa[m];
      for (int64_t n = 0; n < N; ++n) yr[n] = static_cast<float>(cr[n]) * s * sw[n];
    }
  });
}

}  // namespace oneinfer
