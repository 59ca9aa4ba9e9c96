// STAND-IN (branch q4nx): a plain implementation of the interface of quant/gemm_q4.h as
// committed on branch q4, so that the Q4NX binding builds and runs before that branch's
// kernels land. It follows the header's packed layout and formula; the q4 branch's
// gemm_q4*.cc files replace this file at merge.
#include "quant/gemm_q4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/thread_pool.h"

namespace oneinfer {

namespace {

// Byte and nibble of (k within block, column j within panel) in a block's 256 code bytes.
inline size_t CodeByte(int64_t kb, int64_t j) { return static_cast<size_t>((kb / 8) * 64 + 4 * j + (kb % 8) % 4); }
inline int CodeShift(int64_t kb) { return (kb % 8) < 4 ? 0 : 4; }

}  // namespace

absl::StatusOr<PackedWeightsQ4> PackedWeightsQ4::PackWith(int64_t K, int64_t N, const FillFn& fill, ThreadPool* pool) {
  if (K <= 0 || K % kQ4Block != 0 || N <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("4-bit weights need K a positive multiple of ", kQ4Block, " and N > 0; got K=", K, " N=", N));
  }
  PackedWeightsQ4 w;
  w.k_ = K;
  w.n_ = N;
  const size_t total = static_cast<size_t>(w.panels() * w.blocks() * kQ4BlockStride);
  w.data_.reset(static_cast<uint8_t*>(std::calloc(total, 1)));
  if (!w.data_) return absl::ResourceExhaustedError("cannot allocate the packed 4-bit weights");
  const int64_t blocks = w.blocks();
  std::vector<absl::Status> errors(static_cast<size_t>(w.panels()));
  ParallelFor(pool, w.panels(), 1, [&](int64_t p0, int64_t p1) {
    std::vector<uint8_t> codes(static_cast<size_t>(kQ4Panel * K));
    std::vector<float> d(static_cast<size_t>(kQ4Panel * blocks)), m(d.size());
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n0 = p * kQ4Panel, n1 = std::min(N, n0 + kQ4Panel);
      absl::Status st = fill(n0, n1, codes.data(), d.data(), m.data());
      for (int64_t i = 0; st.ok() && i < (n1 - n0) * K; ++i) {
        if (codes[static_cast<size_t>(i)] > 15) st = absl::InvalidArgumentError(absl::StrCat("4-bit code ", int{codes[static_cast<size_t>(i)]}, " is above 15"));
      }
      if (!st.ok()) {
        errors[static_cast<size_t>(p)] = st;
        continue;
      }
      uint8_t* out = w.data_.get() + p * blocks * kQ4BlockStride;
      for (int64_t b = 0; b < blocks; ++b, out += kQ4BlockStride) {
        float* pd = reinterpret_cast<float*>(out + kQ4CodeBytes);
        float* pm = pd + kQ4Panel;
        for (int64_t j = 0; j < n1 - n0; ++j) {
          for (int64_t kb = 0; kb < kQ4Block; ++kb) {
            out[CodeByte(kb, j)] |= static_cast<uint8_t>(codes[static_cast<size_t>(j * K + b * kQ4Block + kb)] << CodeShift(kb));
          }
          pd[j] = d[static_cast<size_t>(j * blocks + b)];
          pm[j] = m[static_cast<size_t>(j * blocks + b)];
        }
      }
    }
  });
  for (const absl::Status& st : errors) {
    if (!st.ok()) return st;
  }
  return w;
}

absl::StatusOr<PackedWeightsQ4> PackedWeightsQ4::Pack(int64_t K, int64_t N, const uint8_t* codes, const float* d,
                                                      const float* m, ThreadPool* pool) {
  const int64_t blocks = K / kQ4Block;
  return PackWith(
      K, N,
      [&](int64_t n0, int64_t n1, uint8_t* c, float* pd, float* pm) {
        std::memcpy(c, codes + n0 * K, static_cast<size_t>((n1 - n0) * K));
        std::memcpy(pd, d + n0 * blocks, static_cast<size_t>((n1 - n0) * blocks) * sizeof(float));
        std::memcpy(pm, m + n0 * blocks, static_cast<size_t>((n1 - n0) * blocks) * sizeof(float));
        return absl::OkStatus();
      },
      pool);
}

uint8_t PackedWeightsQ4::code(int64_t k, int64_t n) const {
  const uint8_t* blk = panel(n / kQ4Panel) + (k / kQ4Block) * kQ4BlockStride;
  return static_cast<uint8_t>((blk[CodeByte(k % kQ4Block, n % kQ4Panel)] >> CodeShift(k % kQ4Block)) & 15);
}
float PackedWeightsQ4::d(int64_t b, int64_t n) const {
  float v;
  std::memcpy(&v, panel(n / kQ4Panel) + b * kQ4BlockStride + kQ4CodeBytes + 4 * (n % kQ4Panel), 4);
  return v;
}
float PackedWeightsQ4::m(int64_t b, int64_t n) const {
  float v;
  std::memcpy(&v, panel(n / kQ4Panel) + b * kQ4BlockStride + kQ4CodeBytes + 4 * (kQ4Panel + n % kQ4Panel), 4);
  return v;
}

void QuantizeRowsQ8Blocks(int64_t M, int64_t K, const float* x, int8_t* q, float* s, float* sum) {
  const int64_t blocks = K / kQ4Block;
  for (int64_t r = 0; r < M; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + r * K + b * kQ4Block;
      int8_t* qb = q + r * K + b * kQ4Block;
      float amax = 0;
      for (int64_t i = 0; i < kQ4Block; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float scale = amax / 127.0f;
      int32_t total = 0;
      for (int64_t i = 0; i < kQ4Block; ++i) {
        const float v = scale > 0 ? std::nearbyint(xb[i] / scale) : 0.0f;  // default rounding: half to even
        qb[i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
        total += qb[i];
      }
      s[r * blocks + b] = scale;
      sum[r * blocks + b] = static_cast<float>(total);
    }
  }
}

void MatMulQ4(int64_t M, const float* a, const PackedWeightsQ4& w, float* y, ThreadPool* pool) {
  const int64_t K = w.K(), N = w.N(), blocks = w.blocks();
  std::vector<int8_t> q(static_cast<size_t>(M * K));
  std::vector<float> s(static_cast<size_t>(M * blocks)), sum(s.size());
  QuantizeRowsQ8Blocks(M, K, a, q.data(), s.data(), sum.data());
  ParallelFor(pool, w.panels(), 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n0 = p * kQ4Panel, n1 = std::min(N, n0 + kQ4Panel);
      for (int64_t r = 0; r < M; ++r) {
        float acc[kQ4Panel] = {};
        const uint8_t* blk = w.panel(p);
        for (int64_t b = 0; b < blocks; ++b, blk += kQ4BlockStride) {
          const int8_t* qb = q.data() + r * K + b * kQ4Block;
          const float* pd = reinterpret_cast<const float*>(blk + kQ4CodeBytes);
          const float* pm = pd + kQ4Panel;
          for (int64_t j = 0; j < n1 - n0; ++j) {
            int32_t dot = 0;
            for (int64_t kb = 0; kb < kQ4Block; ++kb) dot += qb[kb] * ((blk[CodeByte(kb, j)] >> CodeShift(kb)) & 15);
            const float t = std::fma(pd[j], static_cast<float>(dot), pm[j] * sum[static_cast<size_t>(r * blocks + b)]);
            acc[j] = std::fma(s[static_cast<size_t>(r * blocks + b)], t, acc[j]);
          }
        }
        for (int64_t j = 0; j < n1 - n0; ++j) y[r * N + n0 + j] = acc[j];
      }
    }
  });
}

void gemm_q4_reference(int64_t M, int64_t K, int64_t N, const float* a, const uint8_t* codes, const float* d,
                       const float* m, float* y) {
  const int64_t blocks = K / kQ4Block;
  std::vector<int8_t> q(static_cast<size_t>(M * K));
  std::vector<float> s(static_cast<size_t>(M * blocks)), sum(s.size());
  QuantizeRowsQ8Blocks(M, K, a, q.data(), s.data(), sum.data());
  for (int64_t r = 0; r < M; ++r) {
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        int32_t dot = 0;
        for (int64_t i = 0; i < kQ4Block; ++i) dot += q[r * K + b * kQ4Block + i] * codes[n * K + b * kQ4Block + i];
        const float t = std::fma(d[n * blocks + b], static_cast<float>(dot), m[n * blocks + b] * sum[r * blocks + b]);
        acc = std::fma(s[r * blocks + b], t, acc);
      }
      y[r * N + n] = acc;
    }
  }
}

const char* Q4TierName() { return "reference"; }
std::vector<std::string> Q4SupportedTiers() { return {"reference"}; }
bool Q4ForceTierForTesting(const char* tier) { return tier == nullptr || std::string(tier) == "reference"; }

}  // namespace oneinfer
