// 4-bit weight GEMM: y[M x N] = a[M x K] (float) * W[K x N] with W in blocks of 32 consecutive K
// per output column, w[k][n] = code[n][k] * d[n][k/32] + m[n][k/32], code unsigned 0..15.
// Activations are quantised to int8 per block of 32 (q8 style, with block sums for the offset
// term) and the integer block dots are taken directly from the packed nibbles.
//
// Mapping the usual 4-bit formats onto (code, d, m):
//   ONNX int4, q in [-8, 7], scale s, zero point zp (default 0): w = (q - zp) s
//       code = q + 8, d = s, m = -(zp + 8) s
//   ONNX uint4, q in [0, 15], scale s, zero point zp (default 0): w = (q - zp) s
//       code = q,     d = s, m = -zp s
//   Q4NX q4_1 (scale, zero):   code = q, d = scale, m = zero
//   ggml q4_0 (d):             code = q, d = d,     m = -8 d
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/half.h"
#include "base/huge_pages.h"

namespace oneinfer {

class ThreadPool;

inline constexpr int64_t kQ4Block = 32;  // K per quantisation block (weights and activations)
inline constexpr int64_t kQ4Panel = 16;  // output columns per packed panel (one zmm of int32)

// Packed layout: column panels of kQ4Panel columns. Panel p holds, for each K block b in
// order, block_stride() bytes: 256 bytes of codes, then 16 d, then 16 m (one per column of the
// panel), as float32 (kQ4BlockStride = 384 bytes, 0.75 bytes per weight) or, when every d and m
// is exactly a float16 value, as float16 (kQ4BlockStrideF16 = 320, 0.625 bytes per weight). Codes: 4 groups of 64 bytes, group g covering k = 8g .. 8g+7 of the
// block; byte 4j + t of a group holds column j's code for k = 8g + t in its low nibble and for
// k = 8g + 4 + t in its high nibble. Unpacking a group with & 0x0f and >> 4 yields two
// vpdpbusd operands (one 32-bit lane = 4 consecutive k of one column) and, read as two 32-byte
// halves, the AVX2 vpmaddubsw operands, so one packed matrix serves every tier. Columns past N
// are zero codes with d = m = 0.
inline constexpr int64_t kQ4CodeBytes = kQ4Panel * kQ4Block / 2;                       // 256
inline constexpr int64_t kQ4BlockStride = kQ4CodeBytes + 2 * kQ4Panel * sizeof(float);  // 384
inline constexpr int64_t kQ4BlockStrideF16 = kQ4CodeBytes + 2 * kQ4Panel * 2;             // 320

// How d and m are stored. kF16 halves the scale bytes and is exact only for values a float16
// holds (a scale rounded to float16 by its quantiser, ggml's and Q4NX's 16-bit scales). kF32D
// stores d alone as float32 (the same 320-byte block as kF16) when every m is one constant c
// times d, exactly in float (symmetric formats: m = -8 d); the kernels take m = c * d.
enum class Q4ScaleFormat { kF32, kF16, kF32D };

// The most compact exact format for n (d, m) pairs, and c (m = c d) for kF32D; dm(i) gives
// pair i (called twice per pair at most, so sources need not be copied into arrays).
Q4ScaleFormat ChooseQ4ScaleFormat(int64_t n, const std::function<std::pair<float, float>(int64_t)>& dm, float* c);
inline Q4ScaleFormat ChooseQ4ScaleFormat(int64_t n, const float* d, const float* m, float* c) {
  return ChooseQ4ScaleFormat(n, [&](int64_t i) { return std::pair<float, float>(d[i], m[i]); }, c);
}

class PackedWeightsQ4 {
 public:
  PackedWeightsQ4() = default;

  // codes: N x K, one code (0..15) per byte, [out, in] order; d, m: N x K/32 row-major.
  // K must be a positive multiple of 32 (else InvalidArgument); a code above 15 is an error.
  // pool may be null. kF16 is chosen when every d and m is exact in float16.
  static absl::StatusOr<PackedWeightsQ4> Pack(int64_t K, int64_t N, const uint8_t* codes,
                                              const float* d, const float* m, ThreadPool* pool);

  // Streaming form for sources that are not laid out [out, in] (ONNX int4 initializers, Q4NX
  // chunks): fill(n0, n1, codes, d, m) writes columns [n0, n1) (at most kQ4Panel) as
  // codes (n1-n0) x K bytes, d and m (n1-n0) x K/32 floats; it is called once per panel,
  // possibly from several threads at once, and may return an error that aborts the pack.
  // Keeps the transient memory to a few panels whatever N is.
  using FillFn = std::function<absl::Status(int64_t n0, int64_t n1, uint8_t* codes, float* d,
                                            float* m)>;
  // format kF16: every d and m must be exact in float16, kF32D: every m must be c * d in
  // float, else InvalidArgument.
  static absl::StatusOr<PackedWeightsQ4> PackWith(int64_t K, int64_t N, const FillFn& fill,
                                                  ThreadPool* pool,
                                                  Q4ScaleFormat format = Q4ScaleFormat::kF32,
                                                  float c = 0.0f);

  // Row-streaming form for sources stored [K, N] row-major (an ONNX MatMul B such as an int4
  // DequantizeLinear weight): fill(b, codes, d, m) writes K block b = rows [32b, 32b+32) as
  // codes N x 32 bytes (codes[n * 32 + i] for k = 32b + i), d and m N floats. Called once per
  // block, possibly from several threads at once, so a caller can drop each block's source
  // pages as soon as it is read.
  using FillBlockFn = std::function<absl::Status(int64_t b, uint8_t* codes, float* d, float* m)>;
  static absl::StatusOr<PackedWeightsQ4> PackBlocksWith(int64_t K, int64_t N,
                                                        const FillBlockFn& fill, ThreadPool* pool,
                                                        Q4ScaleFormat format = Q4ScaleFormat::kF32,
                                                        float c = 0.0f);

  int64_t K() const { return k_; }
  int64_t N() const { return n_; }
  int64_t blocks() const { return k_ / kQ4Block; }
  int64_t panels() const { return (n_ + kQ4Panel - 1) / kQ4Panel; }
  Q4ScaleFormat scale_format() const { return format_; }
  // kF32D: m = m_per_d() * d for every block.
  float m_per_d() const { return c_; }
  int64_t block_stride() const {
    return format_ == Q4ScaleFormat::kF32 ? kQ4BlockStride : kQ4BlockStrideF16;
  }
  // Resident bytes of the packed matrix (codes and per-block d, m).
  size_t bytes() const { return static_cast<size_t>(panels() * blocks() * block_stride()); }
  const uint8_t* data() const { return data_.get(); }
  const uint8_t* panel(int64_t p) const { return data_.get() + p * blocks() * block_stride(); }

  // Test/debug accessors that decode one entry from the packed layout.
  uint8_t code(int64_t k, int64_t n) const;
  float d(int64_t b, int64_t n) const;
  float m(int64_t b, int64_t n) const;

 private:
  struct Free {
    void operator()(uint8_t* p) const { WeightBlockFree(p); }
  };
  static absl::StatusOr<PackedWeightsQ4> Allocate(int64_t K, int64_t N, Q4ScaleFormat format, float c);
  // Writes columns [n0, n0 + nr) of block b from codes (column j's 32 codes at codes + j * ldc),
  // d[j * ldd], m[j * ldd].
  absl::Status StoreBlock(int64_t b, int64_t n0, int64_t nr, const uint8_t* codes, int64_t ldc,
                          const float* d, const float* m, int64_t ldd);
  int64_t k_ = 0;
  int64_t n_ = 0;
  Q4ScaleFormat format_ = Q4ScaleFormat::kF32;
  float c_ = 0.0f;
  std::unique_ptr<uint8_t[], Free> data_;
};

// Activations quantised q8-style: per row and block of 32, s = amax / 127,
// q = round-half-to-even(x / s) clamped to [-127, 127] (all-zero block: s = 0, q = 0),
// sum = sum of the block's q (exact as a float).
// x: M x K row-major; q: M x K; s, sum: M x K/32. K a multiple of 32.
void QuantizeRowsQ8Blocks(int64_t M, int64_t K, const float* x, int8_t* q, float* s, float* sum);

// y[M x N] (row-major, contiguous) = a[M x K] * W. For each row r and column n, over blocks b
// in ascending order, starting from acc = 0:
//   dot = sum_{i<32} q[r][32b+i] * code[n][32b+i]        (exact int32)
//   t   = fma(d[b][n], float(dot), m[b][n] * sum[r][b])
//   acc = fma(s[r][b], t, acc)
// and y[r][n] = acc. Every tier computes exactly this, so the output is bit-identical to
// gemm_q4_reference on the same inputs. pool may be null; few rows split N, more rows split
// M and N.
void MatMulQ4(int64_t M, const float* a, const PackedWeightsQ4& w, float* y, ThreadPool* pool);

// y[M x N] = a[M x K] * W with float activations (ONNX Runtime's MatMulNBits below
// accuracy_level 4). For each row r and column n: w_k = fma(code[n][k], d[n][k/32], m[n][k/32]),
// four chains acc_t (t = k mod 4, k ascending, from 0) acc_t = fma(a[r][k], w_k, acc_t), and
// y[r][n] = (acc_0 + acc_1) + (acc_2 + acc_3). Every tier computes exactly this (bit-identical to
// gemm_q4_float_reference); the four chains keep the FMA units busy at one row.
void MatMulQ4Float(int64_t M, const float* a, const PackedWeightsQ4& w, float* y, ThreadPool* pool);

// The oracle of MatMulQ4Float: its formula as plain loops on unpacked codes and d, m (as in
// gemm_q4_reference).
void gemm_q4_float_reference(int64_t M, int64_t K, int64_t N, const float* a, const uint8_t* codes,
                             const float* d, const float* m, float* y);

// The oracle of MatMulQ4: its formula as plain loops on unpacked codes (N x K, [out, in]) and
// d, m (N x K/32), with a quantised by QuantizeRowsQ8Blocks.
void gemm_q4_reference(int64_t M, int64_t K, int64_t N, const float* a, const uint8_t* codes,
                       const float* d, const float* m, float* y);

// "reference", "avx2" or "avx512vnni": the 4-bit tier in use, chosen by base/kernel_tier.h
// (KernelFamily::kQ4): the best this CPU and OS run unless SetKernelTier forced one.
const char* Q4TierName();

}  // namespace oneinfer
