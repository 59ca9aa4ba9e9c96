// Dynamic A8W8: per-row activation and per-column weight quantisation around the int8 GEMM.
#include "quant/dynamic_a8w8.h"

#include <emmintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/thread_pool.h"
#include "quant/gemm_s8_internal.h"
#include "quant/weight_quant.h"

namespace oneinfer {
namespace {

// max |x[k]|; NaN when any x[k] is NaN (maxps alone would keep or drop a NaN by its lane and
// position), so that a NaN activation makes its row's outputs NaN, as the float product would.
float AbsMax(const float* x, int64_t K) {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  __m128 m0 = _mm_setzero_ps(), m1 = _mm_setzero_ps(), nan = _mm_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m128 a = _mm_loadu_ps(x + k), b = _mm_loadu_ps(x + k + 4);
    m0 = _mm_max_ps(m0, _mm_and_ps(a, abs_mask));
    m1 = _mm_max_ps(m1, _mm_and_ps(b, abs_mask));
    nan = _mm_or_ps(nan, _mm_cmpunord_ps(a, b));
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, _mm_max_ps(m0, m1));
  float amax = std::max(std::max(lanes[0], lanes[1]), std::max(lanes[2], lanes[3]));
  bool any_nan = _mm_movemask_ps(nan) != 0;
  for (; k < K; ++k) {
    amax = std::max(amax, std::fabs(x[k]));
    any_nan = any_nan || std::isnan(x[k]);
  }
  return any_nan ? std::numeric_limits<float>::quiet_NaN() : amax;
}

// q[k] = QuantizeToS8(x[k], scale), four at a time.
void QuantizeRow(const float* x, int64_t K, float scale, int8_t* q) {
  const __m128 vs = _mm_set1_ps(scale), lo = _mm_set1_ps(-kS8Max), hi = _mm_set1_ps(kS8Max);
  int64_t k = 0;
  for (; k + 4 <= K; k += 4) {
    const __m128 v = _mm_min_ps(_mm_max_ps(_mm_div_ps(_mm_loadu_ps(x + k), vs), lo), hi);
    const __m128i i32 = _mm_cvtps_epi32(v);
    const __m128i i8 = _mm_packs_epi16(_mm_packs_epi32(i32, i32), _mm_setzero_si128());
    const int32_t four = _mm_cvtsi128_si32(i8);
    std::memcpy(q + k, &four, sizeof(four));
  }
  for (; k < K; ++k) q[k] = QuantizeToS8(x[k], scale);
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
  const gemm_s8_internal::GemmS8Tier& tier = gemm_s8_internal::ActiveGemmS8Tier();
  const gemm_s8_internal::AbsMaxFn abs_max = tier.abs_max ? tier.abs_max : AbsMax;
  const gemm_s8_internal::QuantizeRowFn quantize = tier.quantize_row ? tier.quantize_row : QuantizeRow;
  for (int64_t i = 0; i < M; ++i) {
    const float* xr = x + i * ldx;
    int8_t* qr = q + i * ldq;
    const float scale = abs_max(xr, K) / kS8Max;
    scales[i] = scale;
    // An all-zero row: no division by zero. A row with a NaN or an infinity has no int8 form:
    // its scale (NaN or inf) times the zero sums makes every output of the row NaN.
    if (scale == 0.0f || !std::isfinite(scale))
      std::fill(qr, qr + K, int8_t{0});
    else
      quantize(xr, K, scale, qr);
  }
}

A8W8Weights::DeviceCopy::~DeviceCopy() {
  if (offload != nullptr) offload->ForgetWeight(q.data());
}

A8W8Weights A8W8Weights::FromFloat(const float* w, int64_t K, int64_t N, Int8GemmOffload* offload) {
  A8W8Weights out;
  out.scales_.assign(std::max<int64_t>(0, N), 0.0f);
  // The int8 copy lives only until it is packed, unless the device will take this shape.
  std::vector<int8_t> q(static_cast<size_t>(std::max<int64_t>(0, K * N)));
  QuantizeWeightsS8(w, K, N, WeightLayout::kKN, /*per_column=*/true, q.data(), out.scales_.data());
  out.packed_ = PackedWeightsS8::Pack(q.data(), K, N, N);
  out.offload_ = offload;
  if (offload != nullptr && offload->PrepareDesign(K, N)) {
    out.device_copy_ = std::make_unique<DeviceCopy>();
    out.device_copy_->q = std::move(q);
    out.device_copy_->offload = offload;
  }
  return out;
}

A8W8Weights A8W8Weights::FromFloatTransposed(const float* w, int64_t K, int64_t N) {
  A8W8Weights out;
  out.scales_.assign(std::max<int64_t>(0, N), 0.0f);
  std::vector<int8_t> q(static_cast<size_t>(std::max<int64_t>(0, K * N)));
  QuantizeWeightsS8(w, K, N, WeightLayout::kNK, /*per_column=*/true, q.data(), out.scales_.data());
  out.packed_ = PackedWeightsS8::PackTransposed(q.data(), K, N, K);
  return out;
}

A8W8Weights A8W8Weights::FromInt8(const int8_t* w, int64_t K, int64_t N, int64_t ldw,
                                  const float* scales,
                                  const std::function<void(int64_t)>& rows_done) {
  A8W8Weights out;
  out.scales_.assign(scales, scales + std::max<int64_t>(0, N));
  out.packed_ = PackedWeightsS8::Pack(w, K, N, ldw, rows_done);
  return out;
}

namespace {

A8W8Scratch& ThreadScratch() {
  thread_local A8W8Scratch s;
  return s;
}

// A's rows quantised into the calling thread's scratch: q (M x K) and their scales.
void QuantizeA(int64_t M, int64_t K, const float* a, A8W8Scratch& s, ThreadPool* pool) {
  if (static_cast<int64_t>(s.q.size()) < M * K) s.q.resize(M * K);
  if (static_cast<int64_t>(s.scales.size()) < M) s.scales.resize(M);
  int8_t* q = s.q.data();
  float* sa = s.scales.data();
  const int64_t rows_per_chunk = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, K));
  ParallelFor(pool, M, rows_per_chunk, [&](int64_t m0, int64_t m1) {
    QuantizeRowsS8(m1 - m0, K, a + m0 * K, K, q + m0 * K, K, sa + m0);
  });
}

// An offload without designs never takes a call: such a weight runs the packed host GEMM, whose
// tiles dequantise.
bool HostOnly(const A8W8Weights& w) { return w.offload() == nullptr || !w.offload()->configured(); }

// y = the product of the quantised rows (s.q, s.scales) with w, through w's offload.
void ProductThroughOffload(int64_t M, const A8W8Weights& w, A8W8Scratch& s, float* y, ThreadPool* pool) {
  const int64_t K = w.K(), N = w.N();
  Int8GemmOffload* offload = w.offload();
  const int8_t* q = s.q.data();
  const float* sa = s.scales.data();
  if (static_cast<int64_t>(s.acc.size()) < M * N) s.acc.resize(M * N);
  int32_t* acc = s.acc.data();
  bool on_device = false;
  // Two captures keep the std::function in its inline buffer (no allocation per call).
  const HostGemmS8Fn host = [&w, pool](int64_t m, int64_t, int64_t, const int8_t* qa,
                                       const int8_t*, int32_t* c) {
    GemmS8S8S32(m, qa, w.K(), w.packed(), c, w.N(), pool);
  };
  const absl::Status st = offload->RunGemmS8(M, K, N, q, w.device_copy(), acc, host, &on_device);
  // The offload refuses only invalid arguments (M, K, N > 0 and q, acc are set here).
  if (!st.ok()) GemmS8S8S32(M, q, K, w.packed(), acc, N, pool);
  const auto t0 = on_device ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const float* sw = w.scales();
  const int64_t dq_rows = std::max<int64_t>(1, (int64_t{1} << 15) / N);
  ParallelFor(pool, M, dq_rows, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) DequantizeRowS32(acc + m * N, N, sa[m], sw, y + m * N);
  });
  if (on_device) {
    offload->AddEpilogueNs(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now() - t0)
                              .count());
  }
}

}  // namespace

void MatMulA8W8(int64_t M, const float* a, const A8W8Weights& w, float* y, ThreadPool* pool) {
  const int64_t K = w.K(), N = w.N();
  if (M <= 0 || N <= 0) return;
  A8W8Scratch& s = ThreadScratch();
  QuantizeA(M, K, a, s, pool);
  if (HostOnly(w)) {
    GemmS8S8F32Scaled(M, s.q.data(), K, w.packed(), s.scales.data(), w.scales(), y, N, pool);
    return;
  }
  ProductThroughOffload(M, w, s, y, pool);
}

void MatMulA8W8Group(int64_t M, const float* a, const std::vector<const A8W8Weights*>& w, const std::vector<float*>& y,
                     ThreadPool* pool) {
  if (M <= 0 || w.empty()) return;
  const int64_t K = w[0]->K();
  A8W8Scratch& s = ThreadScratch();
  QuantizeA(M, K, a, s, pool);
  std::vector<GemmS8ScaledOutput> host;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i]->N() <= 0) continue;
    if (HostOnly(*w[i])) host.push_back({&w[i]->packed(), w[i]->scales(), y[i], w[i]->N()});
    else ProductThroughOffload(M, *w[i], s, y[i], pool);
  }
  if (!host.empty()) GemmS8S8F32ScaledGroup(M, s.q.data(), K, host, s.scales.data(), pool);
}

}  // namespace oneinfer
