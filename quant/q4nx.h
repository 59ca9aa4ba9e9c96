// Q4NX: the on-disk 4-bit weight format of Ryzen AI NPU runtimes (FastFlowLM), a safetensors
// file whose quantised tensors are grids of 32 x 256 tiles, one fixed-size chunk per tile.
// Only the q4_1 chunk kind is read and written here (docs/q4nx.md); the other kinds are
// recognised by their size and refused by name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/safetensors.h"

namespace oneinfer {
class ThreadPool;

// metadata_props key naming a model's Q4NX file, relative to the model's folder: the
// exporter writes it, the engine binds the file at load (engine/q4nx_binding.h).
inline constexpr char kQ4NXWeightsKey[] = "oneinfer.q4nx_weights";
}  // namespace oneinfer

namespace oneinfer::q4nx {

constexpr int64_t kTileRows = 32;    // output features per tile
constexpr int64_t kTileCols = 256;   // K values per tile
constexpr int64_t kBlock = 32;       // K values per (scale, zero) pair
constexpr int64_t kGroups = kTileCols / kBlock;  // column groups per tile row

// One q4_1 tile. Index g*32 + r is column group g (columns g*32 .. g*32+31) of tile row r.
struct ChunkQ4_1 {
  uint16_t scale[kGroups * kTileRows];  // bf16
  uint16_t zero[kGroups * kTileRows];   // bf16; w = code * scale + zero
  uint8_t codes[kTileRows * kTileCols / 2];  // two ROWS per byte at one column: see CodeIndex
};
static_assert(sizeof(ChunkQ4_1) == 5120, "a q4_1 chunk is 5120 bytes");

constexpr size_t kChunkBytesQ4_1 = 5120;
constexpr size_t kChunkBytesQ4_K = 4736;
constexpr size_t kChunkBytesQ8 = 8704;

// Byte of ChunkQ4_1::codes that holds element (r, c) of a tile (c = g*32 + j); an even row
// sits in the low nibble, the odd row after it in the high nibble.
constexpr size_t CodeIndex(int64_t r, int64_t c) {
  return static_cast<size_t>(((r / 16) * kGroups + c / kBlock) * 256 + 8 * (c % kBlock) + (r % 16) / 2);
}

// A q4_1 weight unpacked: rows = output features (N), cols = K, the Hugging Face [out, in]
// orientation that PackedWeightsQ4::Pack takes. w[r][c] = codes[r][c] * d[r][c/32] + m[r][c/32].
struct Q4_1Weights {
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> codes;  // rows x cols, one code 0..15 per byte
  std::vector<float> d, m;     // rows x cols/32, each exactly a bf16 value
};

// Per 32-block asymmetric quantisation of float [rows, cols] weights: scale = (max-min)/15,
// zero = min, both rounded to bf16, then each code chosen as the nearest against the rounded
// scale and zero. rows % 32 == 0 and cols % 256 == 0.
absl::StatusOr<Q4_1Weights> QuantizeQ4_1(const float* w, int64_t rows, int64_t cols);
// rows x cols floats: code * d + m.
std::vector<float> Dequantize(const Q4_1Weights& q);

// Q4_1Weights <-> tile chunks (tiles row-major over the grid, (rows/32) * (cols/256) chunks).
absl::StatusOr<std::vector<uint8_t>> PackChunks(const Q4_1Weights& q);
// Rows [r0, r1) of a q4_1 weight of `cols` columns from its (already checked) chunks: codes
// (r1-r0) x cols, d and m (r1-r0) x cols/32. For packing a few rows at a time.
void UnpackRows(const uint8_t* chunks, int64_t cols, int64_t r0, int64_t r1, uint8_t* codes, float* d, float* m);
// pool (may be null) splits the work over tile rows.
absl::StatusOr<Q4_1Weights> UnpackChunks(const uint8_t* chunks, size_t bytes, int64_t rows, int64_t cols,
                                         ThreadPool* pool = nullptr);

// A q4_1 tensor as the file stores it.
struct Q4_1Tensor {
  const uint8_t* chunks = nullptr;  // into the mapping
  size_t bytes = 0;
  int64_t rows = 0, cols = 0;
};

class Q4NXFile {
 public:
  static absl::StatusOr<std::shared_ptr<Q4NXFile>> Open(const std::string& path);

  const SafetensorsFile& container() const { return *file_; }
  bool Has(const std::string& name) const { return file_->Find(name) != nullptr; }
  // The q4_1 tensor `name` of rows x cols (Hugging Face [out, in]). A [tile_rows, tile_cols,
  // 5120] tensor must match them; a [tiles, 5120] one must have (rows/32)*(cols/256) tiles.
  // Errors name the tensor: missing, another chunk kind, wrong dtype or tile count.
  absl::StatusOr<Q4_1Tensor> FindQ4_1(const std::string& name, int64_t rows, int64_t cols) const;
  absl::StatusOr<Q4_1Weights> ReadQ4_1(const std::string& name, int64_t rows, int64_t cols) const;
  // A plain BF16 / F16 / F32 tensor converted to float, checked against `shape`.
  absl::StatusOr<std::vector<float>> ReadPlain(const std::string& name, const std::vector<int64_t>& shape) const;

 private:
  std::shared_ptr<SafetensorsFile> file_;
};

// Tensors for a Q4NX file: a q4_1 weight as U8 [rows/32, cols/256, 5120]; a plain one as
// BF16 / F16 / F32 of the given shape.
absl::StatusOr<SafetensorsOut> Q4_1Entry(const std::string& name, const Q4_1Weights& q);
absl::StatusOr<SafetensorsOut> PlainEntry(const std::string& name, const std::string& dtype,
                                          const std::vector<int64_t>& shape, const std::vector<float>& values);
// Writes a Q4NX file (metadata format=q4nx, quant=q4_1, tile 32 x 256).
absl::Status WriteQ4NX(const std::string& path, const std::vector<SafetensorsOut>& tensors);

}  // namespace oneinfer::q4nx
