// Sgemm driver: tier dispatch, cache blocking, packing and the thread split.
#include "ops/gemm/sgemm.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <new>

#include "base/half.h"
#include "base/kernel_tier.h"
#include "base/thread_pool.h"
#include "ops/gemm/sgemm_internal.h"

namespace oneinfer {
namespace {

using gemm_internal::kDirectMaxM;
using gemm_internal::SgemmTier;

// B block kKc x kNc (512 KiB) stays in L2 while every A micro-panel of the M block sweeps it.
constexpr int64_t kKc = 256;
constexpr int64_t kNc = 512;
constexpr int64_t kMc = 192;  // multiple of every tier's MR (4, 6, 8)
// Below this many flops per task another thread costs more than it saves.
constexpr int64_t kMinTaskFlops = int64_t{1} << 18;

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// ---- tier selection ----

// In base/kernel_tier.h's order (kFloatTiers): the one selector picks the index.
const SgemmTier* const kTiers[] = {&gemm_internal::kSgemmTierPortable,
                                   &gemm_internal::kSgemmTierAvx2,
                                   &gemm_internal::kSgemmTierAvx512};
static_assert(std::size(kTiers) == kFloatTierCount);

const SgemmTier& ActiveTier() { return *kTiers[ActiveKernelTier(KernelFamily::kFloat)]; }

// ---- packing ----

// Per-thread scratch reused across calls so steady-state inference never allocates.
float* Scratch(int slot, int64_t floats) {
  struct Buffers {
    float* p[2] = {nullptr, nullptr};
    int64_t n[2] = {0, 0};
    ~Buffers() {
      std::free(p[0]);
      std::free(p[1]);
    }
  };
  thread_local Buffers buf;
  if (buf.n[slot] < floats) {
    std::free(buf.p[slot]);
    buf.n[slot] = RoundUp(floats, 16);
    buf.p[slot] = static_cast<float*>(std::aligned_alloc(64, buf.n[slot] * sizeof(float)));
  }
  return buf.p[slot];
}

// dst: ceil(nc/32) panels of kc x 32 (zero-padded) holding op(B)[k0:k0+kc, n0:n0+nc]
// (T: float, or uint16_t float16 patterns, copied as they are).
template <typename T>
void PackB(bool trans_b, const T* B, int64_t ldb, int64_t k0, int64_t kc, int64_t n0,
           int64_t nc, T* dst) {
  constexpr int64_t P = kSgemmPanel;
  if (!trans_b) {
    // Row by row so the source is read front to back; constant-size memcpy inlines to vector moves.
    const int64_t full = nc / P * P;
    for (int64_t k = 0; k < kc; ++k) {
      const T* s = B + (k0 + k) * ldb + n0;
      T* d = dst + k * P;
      for (int64_t p = 0; p < full; p += P) std::memcpy(d + p * kc, s + p, P * sizeof(T));
      if (full < nc) {
        T* o = d + full * kc;
        for (int64_t j = 0; j < P; ++j) o[j] = full + j < nc ? s[full + j] : T{0};
      }
    }
    return;
  }
  for (int64_t p = 0; p < nc; p += P) {
    const int64_t w = std::min(P, nc - p);
    T* d = dst + (p / P) * kc * P;
    {
      if (w < P) std::fill(d, d + kc * P, T{0});
      // Four source rows at a time so each written panel row is touched once per group.
      int64_t j = 0;
      for (; j + 4 <= w; j += 4) {
        const T* s0 = B + (n0 + p + j) * ldb + k0;
        const T* s1 = s0 + ldb;
        const T* s2 = s1 + ldb;
        const T* s3 = s2 + ldb;
        for (int64_t k = 0; k < kc; ++k) {
          T* o = d + k * P + j;
          o[0] = s0[k];
          o[1] = s1[k];
          o[2] = s2[k];
          o[3] = s3[k];
        }
      }
      for (; j < w; ++j) {
        const T* s = B + (n0 + p + j) * ldb + k0;
        for (int64_t k = 0; k < kc; ++k) d[k * P + j] = s[k];
      }
    }
  }
}

// dst: ceil(mc/mr) panels of kc x mr holding op(A)[m0:m0+mc, k0:k0+kc]; rows past mc unset.
void PackA(bool trans_a, const float* A, int64_t lda, int64_t m0, int64_t mc, int64_t k0,
           int64_t kc, int64_t mr, float* dst) {
  for (int64_t i = 0; i < mc; i += mr) {
    const int64_t h = std::min(mr, mc - i);
    float* d = dst + (i / mr) * kc * mr;
    if (!trans_a) {
      for (int64_t r = 0; r < h; ++r) {
        const float* s = A + (m0 + i + r) * lda + k0;
        for (int64_t k = 0; k < kc; ++k) d[k * mr + r] = s[k];
      }
    } else {
      for (int64_t k = 0; k < kc; ++k)
        std::memcpy(d + k * mr, A + (k0 + k) * lda + m0 + i, h * sizeof(float));
    }
  }
}

// dst[i] = float16 src[i] as float32 (exact): base/half.h's bulk conversion (F16C), or the scalar
// one on the portable tier (which tests force to cover the plain path).
void WidenHalves(const SgemmTier& t, const uint16_t* src, float* dst, int64_t n) {
  if (&t != &gemm_internal::kSgemmTierPortable) return WidenF16(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(src[i]);
}

// ---- driver ----

struct Problem {
  bool trans_a, trans_b;
  int64_t M, N, K;
  float alpha;
  const float* A;
  int64_t lda;
  const float* B;  // unused when packed is set
  int64_t ldb;
  const PackedMatrixB* packed;
  float beta;
  float* C;
  int64_t ldc;
};

// Computes rows [m0, m1) x columns [n0, n1) of C; n0 is a multiple of the panel width.
void RunBlock(const SgemmTier& t, const Problem& p, int64_t m0, int64_t m1, int64_t n0,
              int64_t n1) {
  constexpr int64_t P = kSgemmPanel;
  const int64_t mt = m1 - m0;
  // Decode-sized M: read A in place and stream B once over the full K.
  const bool direct_a = !p.trans_a && mt <= kDirectMaxM;
  // A single row panel uses each B element once, so packing B would only add traffic.
  const bool direct_b = p.packed == nullptr && !p.trans_b && mt <= t.mr;
  // float16 panels are widened in register by the decode tiles where the tier has them, else a
  // cache-sized block at a time into float32 scratch.
  const bool half_b = p.packed != nullptr && p.packed->half();
  const bool half_direct = half_b && direct_a && t.tile_direct_a_half != nullptr;
  // Every element of C sums its products in kKc blocks whatever the number of rows (batch
  // invariance): the decode tiles stream all of K and add the blocks in registers, the others
  // get one block per call and add it through C.
  const bool whole_k = direct_a && (!half_b || half_direct);
  const int64_t kc_max = whole_k ? p.K : std::min(kKc, p.K);
  const int64_t nc_max = whole_k ? n1 - n0 : kNc;
  if (direct_a && p.packed == nullptr && p.trans_b && t.small_m_tb != nullptr) {
    t.small_m_tb(mt, n1 - n0, p.K, p.alpha, p.A + m0 * p.lda, p.lda, p.B + n0 * p.ldb, p.ldb, p.beta,
                 p.C + m0 * p.ldc + n0, p.ldc);
    return;
  }
  if (direct_a && direct_b) {
    t.small_m(mt, n1 - n0, p.K, p.alpha, p.A + m0 * p.lda, p.lda, p.B + n0, p.ldb, p.beta,
              p.C + m0 * p.ldc + n0, p.ldc);
    return;
  }
  float* bbuf = nullptr;
  if ((p.packed == nullptr && !direct_b) || (half_b && !half_direct))
    bbuf = Scratch(0, kc_max * RoundUp(std::min(nc_max, n1 - n0), P));
  float* abuf = direct_a ? nullptr : Scratch(1, RoundUp(std::min(kMc, mt), t.mr) * kc_max);

  for (int64_t jc = n0; jc < n1; jc += nc_max) {
    const int64_t nc = std::min(nc_max, n1 - jc);
    for (int64_t pc = 0; pc < p.K; pc += kc_max) {
      const int64_t kc = std::min(kc_max, p.K - pc);
      const float beta = pc == 0 ? p.beta : 1.0f;
      const float* bblk = nullptr;
      int64_t b_ks, panel_stride;
      if (half_direct) {
        b_ks = P;
        panel_stride = p.K * P;
      } else if (half_b) {
        for (int64_t jp = 0; jp < nc; jp += P)
          WidenHalves(t, p.packed->half_data() + ((jc + jp) / P) * p.K * P + pc * P, bbuf + (jp / P) * kc * P, kc * P);
        bblk = bbuf;
        b_ks = P;
        panel_stride = kc * P;
      } else if (p.packed != nullptr) {
        bblk = p.packed->data() + (jc / P) * p.K * P + pc * P;
        b_ks = P;
        panel_stride = p.K * P;
      } else if (direct_b) {
        bblk = p.B + pc * p.ldb + jc;
        b_ks = p.ldb;
        panel_stride = P;
      } else {
        PackB(p.trans_b, p.B, p.ldb, pc, kc, jc, nc, bbuf);
        bblk = bbuf;
        b_ks = P;
        panel_stride = kc * P;
      }
      for (int64_t ic = m0; ic < m1; ic += kMc) {
        const int64_t mc = std::min(kMc, m1 - ic);
        if (!direct_a) PackA(p.trans_a, p.A, p.lda, ic, mc, pc, kc, t.mr, abuf);
        for (int64_t ir = 0; ir < mc; ir += t.mr) {
          const int64_t mr = std::min(t.mr, mc - ir);
          float* c_row = p.C + (ic + ir) * p.ldc;
          const float* a_panel = direct_a ? p.A + (ic + ir) * p.lda + pc : abuf + ir * kc;
          for (int64_t jr = 0; jr < nc; jr += P) {
            const float* b_panel = half_direct ? nullptr : bblk + (jr / P) * panel_stride;
            const int64_t j_end = std::min(nc, jr + P);
            for (int64_t j = jr; j < j_end; j += t.nr) {
              const int64_t nr = std::min(t.nr, j_end - j);
              if (half_direct)
                t.tile_direct_a_half(kc, kKc, a_panel, p.lda,
                                     p.packed->half_data() + ((jc + jr) / P) * p.K * P + pc * P + (j - jr), b_ks,
                                     c_row + jc + j, p.ldc, mr, nr, p.alpha, beta);
              else if (direct_a)
                t.tile_direct_a(kc, kKc, a_panel, p.lda, b_panel + (j - jr), b_ks, c_row + jc + j,
                                p.ldc, mr, nr, p.alpha, beta);
              else
                t.tile_packed_a(kc, a_panel, b_panel + (j - jr), b_ks, c_row + jc + j, p.ldc, mr,
                                nr, p.alpha, beta);
            }
          }
        }
      }
    }
  }
}

void Run(const Problem& p, ThreadPool* pool) {
  if (p.M <= 0 || p.N <= 0) return;
  if (p.K <= 0 || p.alpha == 0.0f) {
    for (int64_t i = 0; i < p.M; ++i) {
      float* c = p.C + i * p.ldc;
      for (int64_t j = 0; j < p.N; ++j) c[j] = p.beta == 0.0f ? 0.0f : p.beta * c[j];
    }
    return;
  }
  const SgemmTier& t = ActiveTier();
  constexpr int64_t P = kSgemmPanel;
  const int64_t mp = (p.M + t.mr - 1) / t.mr;
  const int64_t np = (p.N + P - 1) / P;
  int64_t threads = pool != nullptr ? pool->num_threads() : 1;
  threads = std::max<int64_t>(1, std::min(threads, 2 * p.M * p.N * p.K / kMinTaskFlops));
  const TaskGrid grid = ChooseTaskGrid(mp, np, threads);
  const int64_t tm = grid.m, tn = grid.n;
  auto task = [&](int64_t i) {
    const int64_t im = i / tn, in = i % tn;
    const int64_t m0 = std::min(p.M, mp * im / tm * t.mr);
    const int64_t m1 = std::min(p.M, mp * (im + 1) / tm * t.mr);
    const int64_t n0 = std::min(p.N, np * in / tn * P);
    const int64_t n1 = std::min(p.N, np * (in + 1) / tn * P);
    if (m0 < m1 && n0 < n1) RunBlock(t, p, m0, m1, n0, n1);
  };
  if (tm * tn == 1 || pool == nullptr) {
    for (int64_t i = 0; i < tm * tn; ++i) task(i);
  } else {
    pool->RunTasks(tm * tn, task);
  }
}

}  // namespace

void Sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc, ThreadPool* pool) {
  Run({trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, nullptr, beta, C, ldc}, pool);
}

void SgemmPacked(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const PackedMatrixB& B, float beta, float* C, int64_t ldc, ThreadPool* pool) {
  Run({false, false, M, N, K, alpha, A, lda, nullptr, 0, &B, beta, C, ldc}, pool);
}

void SgemmReference(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                    const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                    float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = trans_a ? A[k * lda + i] : A[i * lda + k];
        const double b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
        acc += a * b;
      }
      float& c = C[i * ldc + j];
      c = beta == 0.0f ? static_cast<float>(alpha * acc)
                       : static_cast<float>(alpha * acc + double{beta} * c);
    }
  }
}

template <typename T>
PackedMatrixB PackedMatrixB::PackAs(bool trans_b, int64_t K, int64_t N, const T* B, int64_t ldb, ThreadPool* pool) {
  PackedMatrixB packed;
  packed.k_ = std::max<int64_t>(0, K);
  packed.n_ = std::max<int64_t>(0, N);
  packed.half_ = sizeof(T) == 2;
  const size_t bytes = packed.bytes();
  if (bytes == 0) return packed;
  // Weights are hundreds of MB: on 2 MB pages (see WeightBlockAlloc).
  void* p = WeightBlockAlloc(bytes);
  if (p == nullptr) throw std::bad_alloc();
  packed.data_.reset(p);
  constexpr int64_t P = kSgemmPanel;
  const int64_t k = packed.k_, n = packed.n_;
  ParallelFor(pool, packed.panels(), 16, [&](int64_t p0, int64_t p1) {
    PackB<T>(trans_b, B, ldb, 0, k, p0 * P, std::min(n, p1 * P) - p0 * P, static_cast<T*>(p) + p0 * k * P);
  });
  return packed;
}

PackedMatrixB PackedMatrixB::Pack(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb,
                                  ThreadPool* pool) {
  return PackAs<float>(trans_b, K, N, B, ldb, pool);
}

PackedMatrixB PackedMatrixB::PackHalf(bool trans_b, int64_t K, int64_t N, const uint16_t* B, int64_t ldb,
                                      ThreadPool* pool) {
  return PackAs<uint16_t>(trans_b, K, N, B, ldb, pool);
}

const char* SgemmTierName() { return ActiveTier().name; }

}  // namespace oneinfer
