// 4-bit weight GEMM driver: packing, q8 block quantisation of activations, tier choice, split.
#include "quant/gemm_q4.h"

#include <emmintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <mutex>


#include "absl/strings/str_cat.h"
#include "base/kernel_tier.h"
#include "base/thread_pool.h"
#include "quant/gemm_q4_internal.h"

namespace oneinfer {
namespace {

using gemm_q4_internal::GemmQ4Tier;

constexpr int64_t P = kQ4Panel;
constexpr int64_t B = kQ4Block;
constexpr float kQMax = 127.0f;
// Below this many multiply-adds per task another thread costs more than it saves.
constexpr int64_t kMinTaskMacs = int64_t{1} << 18;
// Rows of quantised activations kept hot while one weight panel sweeps them.
constexpr int64_t kARowsBytes = int64_t{256} << 10;

// ---- tier selection ----

// In base/kernel_tier.h's order (kQ4Tiers): the one selector picks the index.
const GemmQ4Tier* const kTiers[] = {&gemm_q4_internal::kGemmQ4TierReference,
                                    &gemm_q4_internal::kGemmQ4TierAvx2,
                                    &gemm_q4_internal::kGemmQ4TierAvx512Vnni};
static_assert(std::size(kTiers) == kQ4TierCount);

const GemmQ4Tier& ActiveTier() { return *kTiers[ActiveKernelTier(KernelFamily::kQ4)]; }

// ---- activation quantisation ----

// One block of 32: s = amax / 127, q = round-half-even(x / s) clamped (cvtps2dq rounds to
// nearest-even in the default MXCSR mode, which the engine never changes).
void QuantizeBlock(const float* x, int8_t* q, float* s, float* sum) {
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  __m128 mx = _mm_setzero_ps();
  for (int k = 0; k < B; k += 4) mx = _mm_max_ps(mx, _mm_and_ps(_mm_loadu_ps(x + k), abs_mask));
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, mx);
  const float amax = std::max(std::max(lanes[0], lanes[1]), std::max(lanes[2], lanes[3]));
  const float scale = amax / kQMax;
  *s = scale;
  if (scale == 0.0f) {  // all-zero block: no division by zero
    std::memset(q, 0, B);
    *sum = 0.0f;
    return;
  }
  const __m128 vs = _mm_set1_ps(scale), lo = _mm_set1_ps(-kQMax), hi = _mm_set1_ps(kQMax);
  __m128i acc = _mm_setzero_si128();
  for (int k = 0; k < B; k += 4) {
    const __m128 v = _mm_min_ps(_mm_max_ps(_mm_div_ps(_mm_loadu_ps(x + k), vs), lo), hi);
    const __m128i i32 = _mm_cvtps_epi32(v);
    acc = _mm_add_epi32(acc, i32);
    const __m128i i8 = _mm_packs_epi16(_mm_packs_epi32(i32, i32), _mm_setzero_si128());
    const int32_t four = _mm_cvtsi128_si32(i8);
    std::memcpy(q + k, &four, sizeof(four));
  }
  alignas(16) int32_t parts[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(parts), acc);
  *sum = static_cast<float>(parts[0] + parts[1] + parts[2] + parts[3]);
}

// Per-thread scratch reused across calls so steady-state inference never allocates.
struct Q8Scratch {
  std::vector<int8_t> q;
  std::vector<float> s, sum;
};

}  // namespace

void QuantizeRowsQ8Blocks(int64_t M, int64_t K, const float* x, int8_t* q, float* s, float* sum) {
  const int64_t kb = K / B;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t b = 0; b < kb; ++b)
      QuantizeBlock(x + i * K + b * B, q + i * K + b * B, s + i * kb + b, sum + i * kb + b);
}


absl::StatusOr<PackedWeightsQ4> PackedWeightsQ4::Allocate(int64_t K, int64_t N,
                                                          Q4ScaleFormat format, float c) {
  if (K <= 0 || K % B != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("4-bit weights: K = ", K, " is not a positive multiple of ", B));
  if (N <= 0) return absl::InvalidArgumentError(absl::StrCat("4-bit weights: N = ", N));
  PackedWeightsQ4 out;
  out.k_ = K;
  out.n_ = N;
  out.format_ = format;
  out.c_ = c;
  const size_t bytes = out.bytes();
  out.data_.reset(static_cast<uint8_t*>(WeightBlockAlloc(bytes)));
  if (out.data_ == nullptr)
    return absl::ResourceExhaustedError(absl::StrCat("4-bit weights: ", bytes, " bytes"));
  return out;
}

absl::Status PackedWeightsQ4::StoreBlock(int64_t b, int64_t n0, int64_t nr, const uint8_t* codes,
                                         int64_t ldc, const float* d, const float* m, int64_t ldd) {
  const int64_t stride = block_stride();
  // Whole panels only (n0 % P == 0); the tail panel's padding columns get zeros.
  for (int64_t p0 = 0; p0 < nr; p0 += P) {
    const int64_t cols = std::min(P, nr - p0);
    uint8_t* dst = data_.get() + ((n0 + p0) / P * blocks() + b) * stride;
    std::memset(dst, 0, stride);
    for (int64_t j = 0; j < cols; ++j) {
      const uint8_t* c = codes + (p0 + j) * ldc;
      for (int64_t g = 0; g < 4; ++g)
        for (int64_t t = 0; t < 4; ++t)
          dst[64 * g + 4 * j + t] = static_cast<uint8_t>(c[8 * g + t] | (c[8 * g + 4 + t] << 4));
    }
    if (format_ == Q4ScaleFormat::kF32) {
      float* dd = reinterpret_cast<float*>(dst + kQ4CodeBytes);
      for (int64_t j = 0; j < cols; ++j) {
        dd[j] = d[(p0 + j) * ldd];
        dd[P + j] = m[(p0 + j) * ldd];
      }
      continue;
    }
    if (format_ == Q4ScaleFormat::kF32D) {
      float* dd = reinterpret_cast<float*>(dst + kQ4CodeBytes);
      for (int64_t j = 0; j < cols; ++j) {
        const float dv = d[(p0 + j) * ldd], mv = m[(p0 + j) * ldd];
        if (c_ * dv != mv)
          return absl::InvalidArgumentError(absl::StrCat("4-bit weights: m = ", mv, " of column ", n0 + p0 + j,
                                                         ", block ", b, " is not ", c_, " d (d = ", dv, ")"));
        dd[j] = dv;
      }
      continue;
    }
    uint16_t* dd = reinterpret_cast<uint16_t*>(dst + kQ4CodeBytes);
    for (int64_t j = 0; j < cols; ++j) {
      const float dv = d[(p0 + j) * ldd], mv = m[(p0 + j) * ldd];
      if (!ExactInFloat16(dv) || !ExactInFloat16(mv))
        return absl::InvalidArgumentError(absl::StrCat(
            "4-bit weights: d = ", dv, " or m = ", mv, " of column ", n0 + p0 + j, ", block ", b,
            " is not exact in float16"));
      dd[j] = F32ToF16(dv);
      dd[P + j] = F32ToF16(mv);
    }
  }
  return absl::OkStatus();
}

namespace {
// The first code above 15 in codes[0, n), as an error naming its place, or OK.
absl::Status CheckCodes(const uint8_t* codes, int64_t n, const std::function<std::string(int64_t)>& where) {
  for (int64_t i = 0; i < n; ++i)
    if (codes[i] > 15)
      return absl::InvalidArgumentError(absl::StrCat("4-bit weights: code ", int{codes[i]}, " > 15 at ", where(i)));
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<PackedWeightsQ4> PackedWeightsQ4::PackWith(int64_t K, int64_t N,
                                                          const FillFn& fill, ThreadPool* pool,
                                                          Q4ScaleFormat format, float c) {
  auto out = Allocate(K, N, format, c);
  if (!out.ok()) return out.status();
  const int64_t kb = K / B;
  std::mutex mu;
  absl::Status first_error;
  ParallelFor(pool, out->panels(), 4, [&](int64_t p0, int64_t p1) {
    std::vector<uint8_t> codes(P * K);
    std::vector<float> d(P * kb), m(P * kb);
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n0 = p * P, nr = std::min(P, N - n0);
      std::fill(codes.begin(), codes.end(), 0);
      absl::Status st = fill(n0, n0 + nr, codes.data(), d.data(), m.data());
      if (st.ok())
        st = CheckCodes(codes.data(), nr * K, [&](int64_t i) {
          return absl::StrCat("column ", n0 + i / K, ", k ", i % K);
        });
      for (int64_t b = 0; st.ok() && b < kb; ++b)
        st = out->StoreBlock(b, n0, nr, codes.data() + b * B, K, d.data() + b, m.data() + b, kb);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = st;
        return;
      }
    }
  });
  if (!first_error.ok()) return first_error;
  return out;
}

absl::StatusOr<PackedWeightsQ4> PackedWeightsQ4::PackBlocksWith(int64_t K, int64_t N,
                                                                const FillBlockFn& fill,
                                                                ThreadPool* pool,
                                                                Q4ScaleFormat format, float c) {
  auto out = Allocate(K, N, format, c);
  if (!out.ok()) return out.status();
  std::mutex mu;
  absl::Status first_error;
  ParallelFor(pool, out->blocks(), 1, [&](int64_t b0, int64_t b1) {
    std::vector<uint8_t> codes(N * B);
    std::vector<float> d(N), m(N);
    for (int64_t b = b0; b < b1; ++b) {
      absl::Status st = fill(b, codes.data(), d.data(), m.data());
      if (st.ok())
        st = CheckCodes(codes.data(), N * B, [&](int64_t i) {
          return absl::StrCat("column ", i / B, ", k ", b * B + i % B);
        });
      if (st.ok()) st = out->StoreBlock(b, 0, N, codes.data(), B, d.data(), m.data(), 1);
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = st;
        return;
      }
    }
  });
  if (!first_error.ok()) return first_error;
  return out;
}

absl::StatusOr<PackedWeightsQ4> PackedWeightsQ4::Pack(int64_t K, int64_t N, const uint8_t* codes,
                                                      const float* d, const float* m,
                                                      ThreadPool* pool) {
  if (K <= 0 || K % B != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("4-bit weights: K = ", K, " is not a positive multiple of ", B));
  const int64_t kb = K / B;
  float c = 0.0f;
  const Q4ScaleFormat format = ChooseQ4ScaleFormat(std::max<int64_t>(N, 0) * kb, d, m, &c);
  return PackWith(
      K, N,
      [&](int64_t n0, int64_t n1, uint8_t* c, float* dd, float* mm) {
        std::memcpy(c, codes + n0 * K, (n1 - n0) * K);
        std::memcpy(dd, d + n0 * kb, (n1 - n0) * kb * sizeof(float));
        std::memcpy(mm, m + n0 * kb, (n1 - n0) * kb * sizeof(float));
        return absl::OkStatus();
      },
      pool, format, c);
}

Q4ScaleFormat ChooseQ4ScaleFormat(int64_t n, const std::function<std::pair<float, float>(int64_t)>& dm, float* c) {
  bool f16 = true;
  for (int64_t i = 0; f16 && i < n; ++i) {
    const auto [d, m] = dm(i);
    f16 = ExactInFloat16(d) && ExactInFloat16(m);
  }
  if (f16) return Q4ScaleFormat::kF16;
  // One ratio for every block: taken from the first nonzero d, then checked as a float product.
  *c = 0.0f;
  int64_t i = 0;
  for (; i < n; ++i) {
    const auto [d, m] = dm(i);
    if (d != 0.0f) {
      *c = m / d;
      break;
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    const auto [d, m] = dm(j);
    if (*c * d != m) return Q4ScaleFormat::kF32;
  }
  return Q4ScaleFormat::kF32D;
}

uint8_t PackedWeightsQ4::code(int64_t k, int64_t n) const {
  const int64_t b = k / B, i = k % B, g = i / 8, t = i % 4, j = n % P;
  const uint8_t byte = panel(n / P)[b * block_stride() + 64 * g + 4 * j + t];
  return (i % 8) < 4 ? (byte & 0x0f) : (byte >> 4);
}

namespace {
// Entry i of the d (i < 16) and m (i >= 16) array of one packed block.
float ScaleEntry(const uint8_t* block, Q4ScaleFormat format, float c, int64_t i) {
  if (format == Q4ScaleFormat::kF32D && i >= P) return c * ScaleEntry(block, format, c, i - P);
  if (format == Q4ScaleFormat::kF16) {
    uint16_t h;
    std::memcpy(&h, block + kQ4CodeBytes + i * 2, 2);
    return F16ToF32(h);
  }
  float v;
  std::memcpy(&v, block + kQ4CodeBytes + i * 4, 4);
  return v;
}
}  // namespace

float PackedWeightsQ4::d(int64_t b, int64_t n) const {
  return ScaleEntry(panel(n / P) + b * block_stride(), format_, c_, n % P);
}

float PackedWeightsQ4::m(int64_t b, int64_t n) const {
  return ScaleEntry(panel(n / P) + b * block_stride(), format_, c_, P + n % P);
}

namespace {
// Splits the M x N output into tasks of row groups and column panels over the pool and calls
// tile(r, mr, p) for every mr-row group (mr <= tier_mr) and panel p; rows sharing a panel are
// taken kARowsBytes of activations at a time, so the panel stays in cache while they pass.
void ForEachTile(int64_t M, const PackedWeightsQ4& w, int64_t tier_mr, ThreadPool* pool,
                 const std::function<void(int64_t r, int64_t mr, int64_t p)>& tile) {
  const int64_t K = w.K(), N = w.N();
  const int64_t mp = (M + tier_mr - 1) / tier_mr, np = w.panels();
  int64_t threads = pool != nullptr ? pool->num_threads() : 1;
  threads = std::max<int64_t>(1, std::min(threads, M * N * K / kMinTaskMacs));
  const TaskGrid grid = ChooseTaskGrid(mp, np, threads);
  const int64_t tm = grid.m, tn = grid.n;
  const int64_t mc = std::max(tier_mr, kARowsBytes / K / tier_mr * tier_mr);
  auto task = [&](int64_t i) {
    const int64_t im = i / tn, in = i % tn;
    const int64_t m0 = std::min(M, mp * im / tm * tier_mr);
    const int64_t m1 = std::min(M, mp * (im + 1) / tm * tier_mr);
    const int64_t p0 = np * in / tn, p1 = np * (in + 1) / tn;
    for (int64_t ic = m0; ic < m1; ic += mc) {
      const int64_t ic_end = std::min(m1, ic + mc);
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t r = ic; r < ic_end; r += tier_mr) tile(r, std::min(tier_mr, ic_end - r), p);
    }
  };
  if (tm * tn == 1 || pool == nullptr) {
    for (int64_t i = 0; i < tm * tn; ++i) task(i);
  } else {
    pool->RunTasks(tm * tn, task);
  }
}
}  // namespace

void MatMulQ4(int64_t M, const float* a, const PackedWeightsQ4& w, float* y, ThreadPool* pool) {
  const int64_t K = w.K(), N = w.N(), kb = w.blocks();
  if (M <= 0 || N <= 0) return;
  thread_local Q8Scratch sc;
  if (static_cast<int64_t>(sc.q.size()) < M * K) sc.q.resize(M * K);
  if (static_cast<int64_t>(sc.s.size()) < M * kb) {
    sc.s.resize(M * kb);
    sc.sum.resize(M * kb);
  }
  int8_t* q = sc.q.data();
  float* s = sc.s.data();
  float* sum = sc.sum.data();
  const int64_t rows_per_chunk = std::max<int64_t>(1, (int64_t{1} << 15) / K);
  ParallelFor(pool, M, rows_per_chunk, [&](int64_t m0, int64_t m1) {
    QuantizeRowsQ8Blocks(m1 - m0, K, a + m0 * K, q + m0 * K, s + m0 * kb, sum + m0 * kb);
  });

  const GemmQ4Tier& t = ActiveTier();
  const gemm_q4_internal::PanelFn panel = t.panel[static_cast<int>(w.scale_format())];
  const float c = w.m_per_d();
  ForEachTile(M, w, t.mr, pool, [&](int64_t r, int64_t mr, int64_t p) {
    panel(kb, q + r * K, K, s + r * kb, sum + r * kb, kb, w.panel(p), y + r * N + p * P, N, mr,
          std::min(P, N - p * P), c);
  });
}

void MatMulQ4Float(int64_t M, const float* a, const PackedWeightsQ4& w, float* y, ThreadPool* pool) {
  const int64_t K = w.K(), N = w.N(), kb = w.blocks();
  if (M <= 0 || N <= 0) return;
  const GemmQ4Tier& t = ActiveTier();
  const gemm_q4_internal::FloatPanelFn panel = t.float_panel[static_cast<int>(w.scale_format())];
  const float c = w.m_per_d();
  ForEachTile(M, w, t.float_mr, pool, [&](int64_t r, int64_t mr, int64_t p) {
    panel(kb, a + r * K, K, w.panel(p), y + r * N + p * P, N, mr, std::min(P, N - p * P), c);
  });
}

void gemm_q4_reference(int64_t M, int64_t K, int64_t N, const float* a, const uint8_t* codes,
                       const float* d, const float* m, float* y) {
  const int64_t kb = K / B;
  std::vector<int8_t> q(M * K);
  std::vector<float> s(M * kb), sum(M * kb);
  QuantizeRowsQ8Blocks(M, K, a, q.data(), s.data(), sum.data());
  for (int64_t r = 0; r < M; ++r)
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t b = 0; b < kb; ++b) {
        int32_t dot = 0;
        for (int64_t i = 0; i < B; ++i)
          dot += int32_t{q[r * K + b * B + i]} * int32_t{codes[n * K + b * B + i]};
        const float t = std::fma(d[n * kb + b], static_cast<float>(dot),
                                 m[n * kb + b] * sum[r * kb + b]);
        acc = std::fma(s[r * kb + b], t, acc);
      }
      y[r * N + n] = acc;
    }
}

void gemm_q4_float_reference(int64_t M, int64_t K, int64_t N, const float* a, const uint8_t* codes,
                             const float* d, const float* m, float* y) {
  const int64_t kb = K / B;
  for (int64_t r = 0; r < M; ++r)
    for (int64_t n = 0; n < N; ++n) {
      float acc[4] = {};
      for (int64_t k = 0; k < K; ++k) {
        const float wk = std::fma(static_cast<float>(codes[n * K + k]), d[n * kb + k / B], m[n * kb + k / B]);
        acc[k % 4] = std::fma(a[r * K + k], wk, acc[k % 4]);
      }
      y[r * N + n] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
}

const char* Q4TierName() { return ActiveTier().name; }

}  // namespace oneinfer
