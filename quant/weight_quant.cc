#include "quant/weight_quant.h"

#include <algorithm>
#include <cmath>

namespace oneinfer {

void QuantizeWeightsS8(const float* w, int64_t K, int64_t N, WeightLayout layout, bool per_column,
                       int8_t* q, float* scales) {
  if (K <= 0 || N <= 0) {
    std::fill(scales, scales + (per_column ? std::max<int64_t>(N, 0) : 1), 1.0f);
    return;
  }
  const int64_t ns = per_column ? N : 1;
  std::fill(scales, scales + ns, 0.0f);
  // Element (k, n) of the matrix is w[k * sk + n * sn].
  const int64_t sk = layout == WeightLayout::kKN ? N : 1;
  const int64_t sn = layout == WeightLayout::kKN ? 1 : K;
  auto slot = [&](int64_t n) -> float& { return scales[per_column ? n : 0]; };
  if (layout == WeightLayout::kKN) {
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) slot(n) = std::max(slot(n), std::fabs(w[k * sk + n * sn]));
  } else {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) slot(n) = std::max(slot(n), std::fabs(w[k * sk + n * sn]));
  }
  for (int64_t i = 0; i < ns; ++i) scales[i] = scales[i] > 0.0f ? scales[i] / kS8Max : 1.0f;
  // An all-zero column has scale 1, so its codes come out 0 without a special case.
  if (layout == WeightLayout::kKN) {
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) q[k * sk + n * sn] = QuantizeToS8(w[k * sk + n * sn], slot(n));
  } else {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) q[k * sk + n * sn] = QuantizeToS8(w[k * sk + n * sn], slot(n));
  }
}

}  // namespace oneinfer
