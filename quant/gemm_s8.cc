// Int8 GEMM driver: tier dispatch, weight packing, A preparation, thread split.
#include "quant/gemm_s8.h"

#include <emmintrin.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <iterator>
#include <type_traits>

#include "absl/types/span.h"
#include "base/kernel_tier.h"
#include "base/thread_pool.h"
#include "quant/gemm_s8_internal.h"

namespace oneinfer {
namespace {

using gemm_s8_internal::AFormat;
using gemm_s8_internal::GemmS8Tier;

constexpr int64_t P = kGemmS8Panel;
// Below this many multiply-adds per task another thread costs more than it saves.
constexpr int64_t kMinTaskMacs = int64_t{1} << 18;
// Rows of prepared A kept hot in L2 while a weight panel sweeps them.
constexpr int64_t kABlockBytes = int64_t{512} << 10;

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// ---- tier selection ----

// In base/kernel_tier.h's order (kInt8Tiers): the one selector picks the index.
const GemmS8Tier* const kTiers[] = {&gemm_s8_internal::kGemmS8TierReference,
                                    &gemm_s8_internal::kGemmS8TierAvx2,
                                    &gemm_s8_internal::kGemmS8TierAvx512Vnni};
static_assert(std::size(kTiers) == kInt8TierCount);

const GemmS8Tier& ActiveTier() { return *kTiers[ActiveKernelTier(KernelFamily::kInt8)]; }

void DequantizeRowSse2(const int32_t* c, int64_t N, float row_scale, const float* col_scales, float* y) {
  const __m128 vs = _mm_set1_ps(row_scale);
  int64_t n = 0;
  for (; n + 4 <= N; n += 4) {
    const __m128 v = _mm_cvtepi32_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + n)));
    _mm_storeu_ps(y + n, _mm_mul_ps(_mm_mul_ps(v, vs), _mm_loadu_ps(col_scales + n)));
  }
  for (; n < N; ++n) y[n] = static_cast<float>(c[n]) * row_scale * col_scales[n];
}

// The tier's dequantiser, or the SSE2 one.
gemm_s8_internal::DequantizeRowFn DequantizeFor(const GemmS8Tier& t) {
  return t.dequantize_row != nullptr ? t.dequantize_row : DequantizeRowSse2;
}

// ---- A preparation ----

// Per-thread scratch reused across calls so steady-state inference never allocates.
void* Scratch(size_t bytes) {
  struct Buffer {
    void* p = nullptr;
    size_t n = 0;
    ~Buffer() { std::free(p); }
  };
  thread_local Buffer buf;
  if (buf.n < bytes) {
    std::free(buf.p);
    buf.n = static_cast<size_t>(RoundUp(static_cast<int64_t>(bytes), 64));
    buf.p = std::aligned_alloc(64, buf.n);
  }
  return buf.p;
}

// dst: M rows x kp elements in the tier's format, k >= K zeroed (the packed weights are zero
// there too, so the value only has to be finite).
template <typename Src>
void PrepareA(AFormat format, int64_t M, const Src* a, int64_t lda, int64_t K, int64_t kp,
              void* dst) {
  if (format == AFormat::kU8Shifted) {
    uint8_t* d = static_cast<uint8_t*>(dst);
    for (int64_t i = 0; i < M; ++i, d += kp) {
      const Src* s = a + i * lda;
      if constexpr (std::is_signed_v<Src>) {
        // a + 128, 16 at a time: GCC leaves the byte loop scalar (a decode step's 200 calls: ~1 ms).
        const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
        int64_t k = 0;
        for (; k + 16 <= K; k += 16) {
          const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(d + k), _mm_xor_si128(v, flip));
        }
        for (; k < K; ++k) d[k] = static_cast<uint8_t>(s[k]) ^ 0x80;
      } else {
        std::memcpy(d, s, K);
      }
      std::fill(d + K, d + kp, uint8_t{0});
    }
  } else {
    int16_t* d = static_cast<int16_t*>(dst);
    for (int64_t i = 0; i < M; ++i, d += kp) {
      const Src* s = a + i * lda;
      for (int64_t k = 0; k < K; ++k) d[k] = s[k];
      std::fill(d + K, d + kp, int16_t{0});
    }
  }
}

// ---- driver ----

struct Problem {
  int64_t M, N, kp;
  const uint8_t* a;  // prepared, M x kp elements of elem bytes
  int64_t elem;
  const PackedWeightsS8* w;
  const int32_t* shift_col_sums;  // null unless s8 activations were shifted to u8
  int32_t* c;  // the int32 result, or null when y takes the dequantised one
  int64_t ldc;
  const float* row_scales;  // with y: the per-row and per-column scales of the epilogue
  const float* col_scales;
  float* y;
  int64_t ldy;
};

// The most rows a tier's panel kernel writes (the epilogue's tile buffer).
constexpr int64_t kMaxTileRows = 8;

// Rows [m0, m1) x panels [p0, p1) of C.
void RunBlock(const GemmS8Tier& t, const Problem& p, int64_t m0, int64_t m1, int64_t p0,
              int64_t p1) {
  const int64_t kq = p.kp / 4;
  const gemm_s8_internal::DequantizeRowFn dequantize = DequantizeFor(t);
  const int64_t mc_max = std::max(t.mr, kABlockBytes / (p.kp * p.elem) / t.mr * t.mr);
  for (int64_t ic = m0; ic < m1; ic += mc_max) {
    const int64_t ic_end = std::min(m1, ic + mc_max);
    const int64_t row_tiles = (ic_end - ic + t.mr - 1) / t.mr;
    // The first row tiles (the tier says how many) share the bringing in of the task's next panel.
    const int64_t sharing = t.next_panel_tiles == 0 ? row_tiles
                            : row_tiles > 1       ? std::min(row_tiles, t.next_panel_tiles)
                                                  : 0;
    for (int64_t pi = p0; pi < p1; ++pi) {
      const int8_t* panel = p.w->data() + pi * p.kp * P;
      const int64_t nr = std::min(P, p.N - pi * P);
      const int32_t* shift = p.shift_col_sums ? p.shift_col_sums + pi * P : nullptr;
      const int64_t next_bytes = pi + 1 < p1 ? p.kp * P : 0;
      for (int64_t ir = ic, rt = 0; ir < ic_end; ir += t.mr, ++rt) {
        const int64_t mr = std::min(t.mr, ic_end - ir);
        const uint8_t* a = p.a + ir * p.kp * p.elem;
        const int64_t b0 = rt < sharing ? next_bytes * rt / sharing / 64 * 64 : 0;
        const int64_t b1 = rt < sharing ? next_bytes * (rt + 1) / sharing / 64 * 64 : 0;
        const gemm_s8_internal::NextPanelSlice next{panel + p.kp * P + b0, b1 - b0};
        if (p.y == nullptr) {
          t.panel(kq, a, p.kp, panel, shift, p.c + ir * p.ldc + pi * P, p.ldc, mr, nr, next);
          continue;
        }
        // The tile's int32 sums stay in this L1 buffer; only the scaled floats reach memory.
        alignas(64) int32_t tile[kMaxTileRows * P];
        t.panel(kq, a, p.kp, panel, shift, tile, P, mr, nr, next);
        for (int64_t r = 0; r < mr; ++r)
          dequantize(tile + r * P, nr, p.row_scales[ir + r], p.col_scales + pi * P, p.y + (ir + r) * p.ldy + pi * P);
      }
    }
  }
}

// c = a w, or with y the epilogue y = (float(a w) * row_scales) * col_scales (c unused).
struct Epilogue {
  const float* row_scales = nullptr;
  const float* col_scales = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
};

// One weight of a run and where its product goes.
struct Target {
  const PackedWeightsS8* w;
  int32_t* c;
  int64_t ldc;
  Epilogue e;
};

// Products of one a with every target's weight (one K), a prepared once and every weight's
// panels shared out over the pool as one run; each target's result is what it gets alone.
template <typename Src>
void Run(int64_t M, const Src* a, int64_t lda, absl::Span<const Target> targets, ThreadPool* pool) {
  if (M <= 0 || targets.empty()) return;
  const int64_t K = targets[0].w->K();
  if (K <= 0) {
    for (const Target& g : targets) {
      const int64_t N = g.w->N();
      const std::vector<int32_t> zeros(static_cast<size_t>(std::max<int64_t>(0, N)), 0);
      for (int64_t i = 0; i < M && N > 0; ++i) {
        if (g.e.y != nullptr) DequantizeRowS32(zeros.data(), N, g.e.row_scales[i], g.e.col_scales, g.e.y + i * g.e.ldy);
        else std::fill(g.c + i * g.ldc, g.c + i * g.ldc + N, 0);
      }
    }
    return;
  }
  const GemmS8Tier& t = ActiveTier();
  const int64_t kp = targets[0].w->padded_k();
  const int64_t elem = t.a_format == AFormat::kS16 ? 2 : 1;
  void* prepared = Scratch(static_cast<size_t>(M * kp * elem));
  PrepareA(t.a_format, M, a, lda, K, kp, prepared);
  const bool shifted = std::is_signed_v<Src> && t.a_format == AFormat::kU8Shifted;
  assert(t.mr <= kMaxTileRows);
  // Each target's problem and where its panels start among all of them.
  std::vector<Problem> problems;
  std::vector<int64_t> first_panel = {0};
  int64_t n_total = 0;
  for (const Target& g : targets) {
    assert(g.w->K() == K);
    problems.push_back(Problem{M, g.w->N(), kp, static_cast<const uint8_t*>(prepared), elem, g.w,
                               shifted ? g.w->column_sums() : nullptr, g.c, g.ldc, g.e.row_scales, g.e.col_scales,
                               g.e.y, g.e.ldy});
    first_panel.push_back(first_panel.back() + g.w->panels());
    n_total += g.w->N();
  }
  const int64_t mp = (M + t.mr - 1) / t.mr;
  const int64_t np = first_panel.back();
  if (np == 0) return;
  int64_t threads = pool != nullptr ? pool->num_threads() : 1;
  threads = std::max<int64_t>(1, std::min(threads, M * n_total * K / kMinTaskMacs));
  const TaskGrid grid = ChooseTaskGrid(mp, np, threads);
  const int64_t tm = grid.m, tn = grid.n;
  auto task = [&](int64_t i) {
    const int64_t im = i / tn, in = i % tn;
    const int64_t m0 = std::min(M, mp * im / tm * t.mr);
    const int64_t m1 = std::min(M, mp * (im + 1) / tm * t.mr);
    const int64_t p0 = np * in / tn, p1 = np * (in + 1) / tn;
    if (m0 >= m1) return;
    for (size_t j = 0; j < problems.size(); ++j) {  // the targets this task's panels fall in
      const int64_t lo = std::max(p0, first_panel[j]), hi = std::min(p1, first_panel[j + 1]);
      if (lo < hi) RunBlock(t, problems[j], m0, m1, lo - first_panel[j], hi - first_panel[j]);
    }
  };
  if (tm * tn == 1 || pool == nullptr) {
    for (int64_t i = 0; i < tm * tn; ++i) task(i);
  } else {
    pool->RunTasks(tm * tn, task);
  }
}

template <typename Src>
void Run(int64_t M, const Src* a, int64_t lda, const PackedWeightsS8& w, int32_t* c, int64_t ldc,
         ThreadPool* pool, const Epilogue& e = {}) {
  if (w.N() <= 0) return;
  const Target target{&w, c, ldc, e};
  Run(M, a, lda, absl::MakeConstSpan(&target, 1), pool);
}

template <typename Src>
void Reference(int64_t M, int64_t N, int64_t K, const Src* a, int64_t lda, const int8_t* w,
               int64_t ldw, int32_t* c, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += int32_t{a[i * lda + k]} * int32_t{w[k * ldw + j]};
      c[i * ldc + j] = acc;
    }
}

}  // namespace

PackedWeightsS8 PackedWeightsS8::Allocate(int64_t K, int64_t N) {
  assert(K <= kMaxK);
  PackedWeightsS8 packed;
  packed.k_ = std::max<int64_t>(0, K);
  packed.n_ = std::max<int64_t>(0, N);
  packed.col_sums_.assign(packed.panels() * P, 0);
  const size_t bytes = packed.bytes();
  if (bytes == 0) return packed;
  packed.data_.reset(static_cast<int8_t*>(WeightBlockAlloc(bytes)));
  if (packed.data_ == nullptr) throw std::bad_alloc();
  std::memset(packed.data_.get(), 0, bytes);  // padding must be zero
  return packed;
}

PackedWeightsS8 PackedWeightsS8::Pack(const int8_t* w, int64_t K, int64_t N, int64_t ldw,
                                      const std::function<void(int64_t)>& rows_done) {
  PackedWeightsS8 packed = Allocate(K, N);
  if (packed.bytes() == 0) return packed;
  int8_t* d = packed.data_.get();
  const int64_t kp = packed.padded_k();
  // Row by row so the source is read front to back.
  for (int64_t k = 0; k < packed.k_; ++k) {
    const int8_t* s = w + k * ldw;
    int8_t* dk = d + (k / 4) * 4 * P + (k % 4);
    for (int64_t n = 0; n < packed.n_; ++n) {
      dk[(n / P) * kp * P + (n % P) * 4] = s[n];
      packed.col_sums_[n] += s[n];
    }
    if (rows_done && ((k + 1) % 64 == 0 || k + 1 == packed.k_)) rows_done(k + 1);
  }
  return packed;
}

PackedWeightsS8 PackedWeightsS8::PackTransposed(const int8_t* w, int64_t K, int64_t N,
                                                int64_t ldw) {
  PackedWeightsS8 packed = Allocate(K, N);
  if (packed.bytes() == 0) return packed;
  int8_t* d = packed.data_.get();
  const int64_t kp = packed.padded_k();
  // One source row is one output column: 4 contiguous k land in 4 contiguous bytes.
  for (int64_t n = 0; n < packed.n_; ++n) {
    const int8_t* s = w + n * ldw;
    int8_t* dn = d + (n / P) * kp * P + (n % P) * 4;
    int32_t sum = 0;
    for (int64_t k = 0; k < packed.k_; ++k) {
      dn[(k / 4) * 4 * P + (k % 4)] = s[k];
      sum += s[k];
    }
    packed.col_sums_[n] = sum;
  }
  return packed;
}

void GemmS8S8S32(int64_t M, const int8_t* a, int64_t lda, const PackedWeightsS8& w, int32_t* c,
                 int64_t ldc, ThreadPool* pool) {
  Run(M, a, lda, w, c, ldc, pool);
}

void GemmU8S8S32(int64_t M, const uint8_t* a, int64_t lda, const PackedWeightsS8& w, int32_t* c,
                 int64_t ldc, ThreadPool* pool) {
  Run(M, a, lda, w, c, ldc, pool);
}

void GemmS8S8F32Scaled(int64_t M, const int8_t* a, int64_t lda, const PackedWeightsS8& w,
                       const float* row_scales, const float* col_scales, float* y, int64_t ldy,
                       ThreadPool* pool) {
  Run(M, a, lda, w, nullptr, 0, pool, Epilogue{row_scales, col_scales, y, ldy});
}

void GemmS8S8F32ScaledGroup(int64_t M, const int8_t* a, int64_t lda, const std::vector<GemmS8ScaledOutput>& outs,
                            const float* row_scales, ThreadPool* pool) {
  std::vector<Target> targets;
  for (const GemmS8ScaledOutput& o : outs) targets.push_back(Target{o.w, nullptr, 0, Epilogue{row_scales, o.col_scales, o.y, o.ldy}});
  Run(M, a, lda, targets, pool);
}

void DequantizeRowS32(const int32_t* c, int64_t N, float row_scale, const float* col_scales, float* y) {
  DequantizeFor(ActiveTier())(c, N, row_scale, col_scales, y);
}

void gemm_s8s8_s32_reference(int64_t M, int64_t N, int64_t K, const int8_t* a, int64_t lda,
                             const int8_t* w, int64_t ldw, int32_t* c, int64_t ldc) {
  Reference(M, N, K, a, lda, w, ldw, c, ldc);
}

void gemm_u8s8_s32_reference(int64_t M, int64_t N, int64_t K, const uint8_t* a, int64_t lda,
                             const int8_t* w, int64_t ldw, int32_t* c, int64_t ldc) {
  Reference(M, N, K, a, lda, w, ldw, c, ldc);
}

const char* Int8TierName() { return ActiveTier().name; }

const GemmS8Tier& gemm_s8_internal::ActiveGemmS8Tier() { return ActiveTier(); }

}  // namespace oneinfer
