// Fused QDQ MatMul: int8 GEMM products, int64 zero-point corrections, one shared epilogue.
#include "quant/qdq_gemm.h"

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "base/thread_pool.h"

namespace oneinfer {

namespace {

absl::Status CheckZeroPoints(const std::vector<int32_t>& zp, bool is_unsigned, const char* what) {
  const int32_t lo = is_unsigned ? 0 : -128, hi = is_unsigned ? 255 : 127;
  for (int32_t z : zp) {
    if (z < lo || z > hi) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", z, " is outside the ", is_unsigned ? "uint8" : "int8",
                                                     " range"));
    }
  }
  return absl::OkStatus();
}

// Writes one output element of the group from its exact accumulator.
template <QdqOut kOut>
struct Store;

template <>
struct Store<QdqOut::kFloat32> {
  static void At(void* y, int64_t i, int64_t acc, float sx, float sw, float, int32_t, float) {
    static_cast<float*>(y)[i] = QdqDequantize(acc, sx, sw);
  }
};

template <>
struct Store<QdqOut::kInt32> {
  static void At(void* y, int64_t i, int64_t acc, float, float, float, int32_t, float) {
    static_cast<int32_t*>(y)[i] = static_cast<int32_t>(static_cast<uint32_t>(acc));  // modulo 2^32
  }
};

template <>
struct Store<QdqOut::kInt8> {
  static void At(void* y, int64_t i, int64_t acc, float, float, float mult, int32_t zp, float) {
    static_cast<int8_t*>(y)[i] = static_cast<int8_t>(QdqRequantize(acc, mult, zp, -128, 127));
  }
};

template <>
struct Store<QdqOut::kUInt8> {
  static void At(void* y, int64_t i, int64_t acc, float, float, float mult, int32_t zp, float) {
    static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(QdqRequantize(acc, mult, zp, 0, 255));
  }
};

template <>
struct Store<QdqOut::kInt8AsFloat32> {
  static void At(void* y, int64_t i, int64_t acc, float, float, float mult, int32_t zp, float sy) {
    static_cast<float*>(y)[i] = QdqDequantizeOutput(QdqRequantize(acc, mult, zp, -128, 127), zp, sy);
  }
};

template <>
struct Store<QdqOut::kUInt8AsFloat32> {
  static void At(void* y, int64_t i, int64_t acc, float, float, float mult, int32_t zp, float sy) {
    static_cast<float*>(y)[i] = QdqDequantizeOutput(QdqRequantize(acc, mult, zp, 0, 255), zp, sy);
  }
};

template <typename F>
void DispatchOut(QdqOut out, F&& f) {
  switch (out) {
    case QdqOut::kFloat32: f(std::integral_constant<QdqOut, QdqOut::kFloat32>{}); break;
    case QdqOut::kInt8: f(std::integral_constant<QdqOut, QdqOut::kInt8>{}); break;
    case QdqOut::kUInt8: f(std::integral_constant<QdqOut, QdqOut::kUInt8>{}); break;
    case QdqOut::kInt32: f(std::integral_constant<QdqOut, QdqOut::kInt32>{}); break;
    case QdqOut::kInt8AsFloat32: f(std::integral_constant<QdqOut, QdqOut::kInt8AsFloat32>{}); break;
    case QdqOut::kUInt8AsFloat32: f(std::integral_constant<QdqOut, QdqOut::kUInt8AsFloat32>{}); break;
  }
}

int32_t ActivationAt(const void* a, bool a_unsigned, int64_t i) {
  return a_unsigned ? int32_t{static_cast<const uint8_t*>(a)[i]} : int32_t{static_cast<const int8_t*>(a)[i]};
}

}  // namespace

absl::Status ValidateQdqGemmParams(const QdqGemmParams& p) {
  if (p.K < 1 || p.K > PackedWeightsS8::kMaxK || p.N < 1) {
    return absl::InvalidArgumentError(absl::StrCat("QDQ MatMul weight [", p.K, ", ", p.N, "] is not supported (K in 1..",
                                                   PackedWeightsS8::kMaxK, ", N >= 1)"));
  }
  if (p.w == nullptr) return absl::InvalidArgumentError("QDQ MatMul has no weight");
  if (p.s_x.empty()) return absl::InvalidArgumentError("x_scale is empty");
  if (!p.zp_x.empty() && p.zp_x.size() != p.s_x.size()) {
    return absl::InvalidArgumentError(absl::StrCat("x_zero_point has ", p.zp_x.size(), " values but x_scale has ",
                                                   p.s_x.size()));
  }
  if (p.s_w.size() != 1 && static_cast<int64_t>(p.s_w.size()) != p.N) {
    return absl::InvalidArgumentError(absl::StrCat("w_scale must have 1 or ", p.N, " values, got ", p.s_w.size()));
  }
  if (!p.zp_w.empty() && p.zp_w.size() != p.s_w.size()) {
    return absl::InvalidArgumentError(absl::StrCat("w_zero_point has ", p.zp_w.size(), " values but w_scale has ",
                                                   p.s_w.size()));
  }
  if (auto s = CheckZeroPoints(p.zp_x, p.x_unsigned, "x_zero_point"); !s.ok()) return s;
  if (auto s = CheckZeroPoints(p.zp_w, p.w_unsigned, "w_zero_point"); !s.ok()) return s;
  if (QdqOutputQuantised(p.out)) {
    if (p.s_y.empty()) return absl::InvalidArgumentError("y_scale is empty");
    if (p.y_axis == QdqYAxis::kColumn && p.s_y.size() != 1 && static_cast<int64_t>(p.s_y.size()) != p.N) {
      return absl::InvalidArgumentError(absl::StrCat("per-column y_scale must have 1 or ", p.N, " values, got ",
                                                     p.s_y.size()));
    }
    if (p.y_axis == QdqYAxis::kTensor && p.s_y.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("per-tensor y_scale has ", p.s_y.size(), " values"));
    }
    for (float s : p.s_y) {
      if (s == 0.0f || !std::isfinite(s)) {
        return absl::InvalidArgumentError(absl::StrCat("y_scale must be finite and non-zero, got ", s));
      }
    }
    if (!p.zp_y.empty() && p.zp_y.size() != p.s_y.size()) {
      return absl::InvalidArgumentError(absl::StrCat("y_zero_point has ", p.zp_y.size(), " values but y_scale has ",
                                                     p.s_y.size()));
    }
    if (auto s = CheckZeroPoints(p.zp_y, QdqOutputUnsigned(p.out), "y_zero_point"); !s.ok()) return s;
  } else if (!p.s_y.empty() || !p.zp_y.empty()) {
    return absl::InvalidArgumentError("y_scale given for an unquantised output");
  }
  return absl::OkStatus();
}

QdqGemm::QdqGemm(QdqGemmParams p) : p_(std::move(p)) {
  // Weight zero points in the domain of w' (uint8 weights are multiplied as w - 128).
  const size_t nz = std::max<size_t>(1, p_.zp_w.size());
  std::vector<int32_t> zw(nz, 0);
  bool any = false;
  for (size_t i = 0; i < nz; ++i) {
    zw[i] = (p_.zp_w.empty() ? 0 : p_.zp_w[i]) - (p_.w_unsigned ? 128 : 0);
    any = any || zw[i] != 0;
  }
  if (any) zw_ = std::move(zw);
  const bool row_dependent = p_.s_x.size() > 1 || (p_.y_axis == QdqYAxis::kRow && p_.s_y.size() > 1);
  if (QdqOutputQuantised(p_.out) && !row_dependent) {
    col_mult_.resize(static_cast<size_t>(p_.N));
    for (int64_t n = 0; n < p_.N; ++n) {
      const float sy = p_.s_y[p_.y_axis == QdqYAxis::kColumn ? QdqColIndex(n, p_.s_y.size()) : 0];
      col_mult_[n] = QdqMultiplier(p_.s_x[0], p_.s_w[QdqColIndex(n, p_.s_w.size())], sy);
    }
  }
}

absl::StatusOr<std::unique_ptr<QdqGemm>> QdqGemm::Create(QdqGemmParams p) {
  if (auto s = ValidateQdqGemmParams(p); !s.ok()) return s;
  return std::unique_ptr<QdqGemm>(new QdqGemm(std::move(p)));
}

void QdqGemm::Prepare() const {
  std::call_once(packed_once_, [&] {
    if (!p_.w_unsigned) {
      packed_ = PackedWeightsS8::Pack(static_cast<const int8_t*>(p_.w), p_.K, p_.N, p_.N);
      return;
    }
    // uint8 weights: w' = w - 128 (flipping the top bit), zero points shifted to match.
    const uint8_t* w = static_cast<const uint8_t*>(p_.w);
    std::vector<int8_t> shifted(static_cast<size_t>(p_.K * p_.N));
    for (size_t i = 0; i < shifted.size(); ++i) shifted[i] = static_cast<int8_t>(w[i] ^ 0x80);
    packed_ = PackedWeightsS8::Pack(shifted.data(), p_.K, p_.N, p_.N);
  });
}

void QdqGemm::HostProducts(int64_t rows, const void* a, bool a_unsigned, int32_t* c, ThreadPool* pool) const {
  Prepare();
  if (a_unsigned) {
    GemmU8S8S32(rows, static_cast<const uint8_t*>(a), p_.K, packed_, c, p_.N, pool);
  } else {
    GemmS8S8S32(rows, static_cast<const int8_t*>(a), p_.K, packed_, c, p_.N, pool);
  }
}

void QdqGemm::Epilogue(int64_t rows, int64_t row0, const void* a, bool a_unsigned, const int32_t* c, void* y,
                       ThreadPool* pool, const int32_t* zp_x, size_t zp_x_len) const {
  if (zp_x == nullptr) {
    zp_x = p_.zp_x.data();
    zp_x_len = p_.zp_x.size();
  }
  bool any_zx = false;
  for (size_t i = 0; i < zp_x_len; ++i) any_zx = any_zx || zp_x[i] != 0;
  const int32_t* colsum = nullptr;
  if (any_zx) {
    Prepare();
    colsum = packed_.column_sums();
    if (!colsum_used_.exchange(true, std::memory_order_relaxed) && QdqDebugEnabled(p_.trace)) {
      QdqDebug(absl::StrCat("qdq_colsum k=", p_.K, " n=", p_.N, " source=packed_weight"), p_.trace);
    }
  }
  const int64_t K = p_.K, N = p_.N;
  const bool need_rowsum = !zw_.empty();
  DispatchOut(p_.out, [&](auto tag) {
    constexpr QdqOut kOut = decltype(tag)::value;
    // Tasks of one row x up to kEpilogueColumns columns, so a decode row over a wide output
    // (lm_head) splits across threads too.
    constexpr int64_t kEpilogueColumns = 4096;
    const int64_t chunks = (N + kEpilogueColumns - 1) / kEpilogueColumns;
    ParallelFor(pool, rows * chunks, std::max<int64_t>(1, 16384 / std::min(N, kEpilogueColumns)), [&](int64_t b, int64_t e) {
      for (int64_t task = b; task < e; ++task) {
        const int64_t r = task / chunks;
        const int64_t n0 = task % chunks * kEpilogueColumns, n1 = std::min(N, n0 + kEpilogueColumns);
        const int64_t R = row0 + r;
        int64_t rowsum = 0;
        if (need_rowsum) {
          if (a_unsigned) {
            const uint8_t* ar = static_cast<const uint8_t*>(a) + r * K;
            for (int64_t k = 0; k < K; ++k) rowsum += ar[k];
          } else {
            const int8_t* ar = static_cast<const int8_t*>(a) + r * K;
            for (int64_t k = 0; k < K; ++k) rowsum += ar[k];
          }
        }
        const int64_t zx = zp_x_len ? zp_x[QdqRowIndex(R, zp_x_len)] : 0;
        const float sx = p_.s_x[QdqRowIndex(R, p_.s_x.size())];
        const float sy_row = p_.y_axis == QdqYAxis::kRow ? p_.s_y[QdqRowIndex(R, p_.s_y.size())] : 0.0f;
        const int32_t zy_row =
            p_.y_axis == QdqYAxis::kRow && !p_.zp_y.empty() ? p_.zp_y[QdqRowIndex(R, p_.zp_y.size())] : 0;
        const int32_t* cr = c + r * N;
        for (int64_t n = n0; n < n1; ++n) {
          const int64_t zw = need_rowsum ? zw_[QdqColIndex(n, zw_.size())] : 0;
          int64_t acc = cr[n];
          if (colsum) acc -= zx * colsum[n];
          if (need_rowsum) acc += zw * (K * zx - rowsum);
          const float sw = p_.s_w[QdqColIndex(n, p_.s_w.size())];
          float mult = 0.0f, sy = 0.0f;
          int32_t zy = 0;
          if constexpr (QdqOutputQuantised(kOut)) {
            if (p_.y_axis == QdqYAxis::kColumn) {
              zy = p_.zp_y.empty() ? 0 : p_.zp_y[QdqColIndex(n, p_.zp_y.size())];
            } else if (p_.y_axis == QdqYAxis::kRow) {
              zy = zy_row;
            } else {
              zy = p_.zp_y.empty() ? 0 : p_.zp_y[0];
            }
            sy = p_.y_axis == QdqYAxis::kRow      ? sy_row
                 : p_.y_axis == QdqYAxis::kColumn ? p_.s_y[QdqColIndex(n, p_.s_y.size())]
                                                  : p_.s_y[0];
            mult = !col_mult_.empty() ? col_mult_[n] : QdqMultiplier(sx, sw, sy);
          }
          Store<kOut>::At(y, r * N + n, acc, sx, sw, mult, zy, sy);
        }
      }
    });
  });
}

void QdqGemm::Run(int64_t rows, const void* a, bool a_unsigned, void* y, int32_t* scratch, ThreadPool* pool) const {
  HostProducts(rows, a, a_unsigned, scratch, pool);
  Epilogue(rows, 0, a, a_unsigned, scratch, y, pool);
}

void QdqGemmReference(const QdqGemmParams& p, int64_t rows, const void* a, bool a_unsigned, void* y,
                      const int32_t* zp_x, size_t zp_x_len) {
  if (zp_x == nullptr) {
    zp_x = p.zp_x.data();
    zp_x_len = p.zp_x.size();
  }
  const int64_t K = p.K, N = p.N;
  auto w_at = [&](int64_t i) -> int64_t {
    return p.w_unsigned ? int64_t{static_cast<const uint8_t*>(p.w)[i]} : int64_t{static_cast<const int8_t*>(p.w)[i]};
  };
  DispatchOut(p.out, [&](auto tag) {
    constexpr QdqOut kOut = decltype(tag)::value;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t zx = zp_x_len ? zp_x[QdqRowIndex(r, zp_x_len)] : 0;
      const float sx = p.s_x[QdqRowIndex(r, p.s_x.size())];
      for (int64_t n = 0; n < N; ++n) {
        const int64_t zw = p.zp_w.empty() ? 0 : p.zp_w[QdqColIndex(n, p.zp_w.size())];
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += (ActivationAt(a, a_unsigned, r * K + k) - zx) * (w_at(k * N + n) - zw);
        const float sw = p.s_w[QdqColIndex(n, p.s_w.size())];
        float mult = 0.0f, sy = 0.0f;
        int32_t zy = 0;
        if constexpr (QdqOutputQuantised(kOut)) {
          int64_t yi = 0;
          if (p.y_axis == QdqYAxis::kRow) yi = QdqRowIndex(r, p.s_y.size());
          if (p.y_axis == QdqYAxis::kColumn) yi = QdqColIndex(n, p.s_y.size());
          sy = p.s_y[yi];
          mult = QdqMultiplier(sx, sw, sy);
          zy = p.zp_y.empty() ? 0 : p.zp_y[yi];
        }
        Store<kOut>::At(y, r * N + n, acc, sx, sw, mult, zy, sy);
      }
    }
  });
}

}  // namespace oneinfer
