// com.microsoft MatMulNBits: y = A x dequant(B)^T (+ bias), B stored [N, K] in blocks of
// block_size along K, each block one scale and one zero point:
//   w[n][k] = (q[n][k] - zp[n][k / block_size]) * scale[n][k / block_size]
// q: `bits`-wide codes packed low bits first into blob_size = block_size * bits / 8 bytes per
// block; zp: packed into bytes (rows padded to whole bytes), or float of A's type, or absent
// (2^(bits - 1)). The last block of a row may be partial (K need not divide by block_size).
//
// The kernel (ops/contrib_matmul_nbits.cc) runs 4-bit weights on the 4-bit GEMM
// (quant/gemm_q4.h: int8 activations per block of 32); MatMulNBitsReference is the plain float
// product of the dequantised weights, the oracle its tests compare with.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "oneinfer/tensor.h"

namespace oneinfer {

// The operator's weights as the node gives them, checked against K, N, bits and block_size.
struct NBitsWeights {
  int64_t K = 0, N = 0, bits = 4, block_size = 128;
  int64_t blocks = 0;     // per column: ceil(K / block_size)
  int64_t blob = 0;       // bytes per block: block_size * bits / 8
  int64_t zp_row = 0;     // bytes of packed zero points per column: ceil(blocks * bits / 8)
  Tensor b;                          // uint8 N x blocks x blob
  Tensor scales;                     // N * blocks, float32 or float16
  Tensor zero_points;                // undefined, uint8 N * zp_row, or scales' type N * blocks

  uint32_t Code(int64_t n, int64_t k) const {
    const uint8_t* row = b.data<uint8_t>() + (n * blocks + k / block_size) * blob;
    const int64_t i = k % block_size;
    return bits == 8 ? row[i] : (row[i / 2] >> ((i & 1) * 4)) & 0x0f;
  }
  float Scale(int64_t n, int64_t blk) const;
  float ZeroPoint(int64_t n, int64_t blk) const;
};

// Checks the shapes and types of B, scales and zero_points (zero_points may be null) against
// the attributes; `what` (the node) starts every error.
absl::StatusOr<NBitsWeights> CheckNBitsWeights(const std::string& what, int64_t K, int64_t N,
                                               int64_t bits, int64_t block_size, const Tensor& b,
                                               const Tensor& scales, const Tensor* zero_points);

// y[M x N] = a[M x K] * w^T + bias (bias may be null): every w dequantised in float as
// (float(q) - zp) * scale, products accumulated in double.
void MatMulNBitsReference(int64_t M, const float* a, const NBitsWeights& w, const float* bias,
                          float* y);

}  // namespace oneinfer
