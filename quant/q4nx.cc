#include "quant/q4nx.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/thread_pool.h"

namespace oneinfer::q4nx {

namespace {

absl::Status CheckGrid(const std::string& what, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0 || rows % kTileRows != 0 || cols % kTileCols != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", rows, " x ", cols, " (rows x cols); Q4NX tiles need rows % ",
                                                   kTileRows, " == 0 and cols % ", kTileCols, " == 0"));
  }
  return absl::OkStatus();
}

std::string ShapeText(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) absl::StrAppend(&r, i ? ", " : "", s[i]);
  return r + "]";
}

float RoundBf16(float x) { return Bf16ToF32(F32ToBf16(x)); }

}  // namespace

absl::StatusOr<Q4_1Weights> QuantizeQ4_1(const float* w, int64_t rows, int64_t cols) {
  if (auto st = CheckGrid("the weight", rows, cols); !st.ok()) return st;
  Q4_1Weights q;
  q.rows = rows;
  q.cols = cols;
  const int64_t blocks = cols / kBlock;
  q.codes.resize(static_cast<size_t>(rows * cols));
  q.d.resize(static_cast<size_t>(rows * blocks));
  q.m.resize(static_cast<size_t>(rows * blocks));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* x = w + r * cols + b * kBlock;
      float lo = x[0], hi = x[0];
      for (int64_t j = 0; j < kBlock; ++j) {
        if (!std::isfinite(x[j])) {
          return absl::InvalidArgumentError(absl::StrCat("weight element (", r, ", ", b * kBlock + j, ") is not finite"));
        }
        lo = std::min(lo, x[j]);
        hi = std::max(hi, x[j]);
      }
      const float scale = RoundBf16((hi - lo) / 15.0f), zero = RoundBf16(lo);
      q.d[static_cast<size_t>(r * blocks + b)] = scale;
      q.m[static_cast<size_t>(r * blocks + b)] = zero;
      uint8_t* c = q.codes.data() + r * cols + b * kBlock;
      for (int64_t j = 0; j < kBlock; ++j) {
        // Nearest code against the rounded scale and zero (what a reader reconstructs).
        const float v = scale > 0 ? std::nearbyint((x[j] - zero) / scale) : 0.0f;
        c[j] = static_cast<uint8_t>(std::clamp(v, 0.0f, 15.0f));
      }
    }
  }
  return q;
}

std::vector<float> Dequantize(const Q4_1Weights& q) {
  std::vector<float> w(q.codes.size());
  const int64_t blocks = q.cols / kBlock;
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t c = 0; c < q.cols; ++c) {
      const size_t i = static_cast<size_t>(r * q.cols + c), b = static_cast<size_t>(r * blocks + c / kBlock);
      w[i] = static_cast<float>(q.codes[i]) * q.d[b] + q.m[b];
    }
  return w;
}

absl::StatusOr<std::vector<uint8_t>> PackChunks(const Q4_1Weights& q) {
  if (auto st = CheckGrid("the weight", q.rows, q.cols); !st.ok()) return st;
  const int64_t tile_rows = q.rows / kTileRows, tile_cols = q.cols / kTileCols, blocks = q.cols / kBlock;
  if (q.codes.size() != static_cast<size_t>(q.rows * q.cols) || q.d.size() != static_cast<size_t>(q.rows * blocks) ||
      q.m.size() != static_cast<size_t>(q.rows * blocks)) {
    return absl::InvalidArgumentError("q4_1 weights: codes, scales or zeros have the wrong length");
  }
  std::vector<uint8_t> out(static_cast<size_t>(tile_rows * tile_cols) * kChunkBytesQ4_1, 0);
  for (int64_t tr = 0; tr < tile_rows; ++tr) {
    for (int64_t tc = 0; tc < tile_cols; ++tc) {
      ChunkQ4_1 chunk{};
      for (int64_t r = 0; r < kTileRows; ++r) {
        const int64_t row = tr * kTileRows + r;
        for (int64_t g = 0; g < kGroups; ++g) {
          const size_t b = static_cast<size_t>(row * blocks + tc * kGroups + g);
          chunk.scale[g * kTileRows + r] = F32ToBf16(q.d[b]);
          chunk.zero[g * kTileRows + r] = F32ToBf16(q.m[b]);
        }
        for (int64_t c = 0; c < kTileCols; ++c) {
          const uint8_t code = q.codes[static_cast<size_t>(row * q.cols + tc * kTileCols + c)];
          if (code > 15) return absl::InvalidArgumentError(absl::StrCat("code ", int{code}, " at (", row, ", ", tc * kTileCols + c, ") is above 15"));
          chunk.codes[CodeIndex(r, c)] |= static_cast<uint8_t>(r % 2 == 0 ? code : code << 4);
        }
      }
      std::memcpy(out.data() + static_cast<size_t>(tr * tile_cols + tc) * kChunkBytesQ4_1, &chunk, sizeof chunk);
    }
  }
  return out;
}

void UnpackRows(const uint8_t* chunks, int64_t cols, int64_t r0, int64_t r1, uint8_t* codes, float* d, float* m) {
  const int64_t tile_cols = cols / kTileCols, blocks = cols / kBlock;
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t tr = row / kTileRows, r = row % kTileRows, i = row - r0;
    const int shift = r % 2 == 0 ? 0 : 4;  // even rows in the low nibble
    for (int64_t tc = 0; tc < tile_cols; ++tc) {
      // Byte offsets, not a struct pointer: a foreign file's data need not be 2-byte aligned.
      const uint8_t* chunk = chunks + static_cast<size_t>(tr * tile_cols + tc) * kChunkBytesQ4_1;
      for (int64_t g = 0; g < kGroups; ++g) {
        uint16_t scale, zero;
        std::memcpy(&scale, chunk + offsetof(ChunkQ4_1, scale) + 2 * (g * kTileRows + r), 2);
        std::memcpy(&zero, chunk + offsetof(ChunkQ4_1, zero) + 2 * (g * kTileRows + r), 2);
        d[i * blocks + tc * kGroups + g] = Bf16ToF32(scale);
        m[i * blocks + tc * kGroups + g] = Bf16ToF32(zero);
      }
      uint8_t* dst = codes + i * cols + tc * kTileCols;
      const uint8_t* code_bytes = chunk + offsetof(ChunkQ4_1, codes);
      for (int64_t c = 0; c < kTileCols; ++c) dst[c] = static_cast<uint8_t>((code_bytes[CodeIndex(r, c)] >> shift) & 15);
    }
  }
}

absl::StatusOr<Q4_1Weights> UnpackChunks(const uint8_t* chunks, size_t bytes, int64_t rows, int64_t cols,
                                         ThreadPool* pool) {
  if (auto st = CheckGrid("the weight", rows, cols); !st.ok()) return st;
  const int64_t tile_rows = rows / kTileRows, tile_cols = cols / kTileCols, blocks = cols / kBlock;
  if (bytes != static_cast<size_t>(tile_rows * tile_cols) * kChunkBytesQ4_1) {
    return absl::InvalidArgumentError(absl::StrCat(bytes, " bytes of q4_1 chunks for a ", rows, " x ", cols, " weight; expected ",
                                                   tile_rows * tile_cols * static_cast<int64_t>(kChunkBytesQ4_1)));
  }
  Q4_1Weights q;
  q.rows = rows;
  q.cols = cols;
  q.codes.resize(static_cast<size_t>(rows * cols));
  q.d.resize(static_cast<size_t>(rows * blocks));
  q.m.resize(static_cast<size_t>(rows * blocks));
  ParallelFor(pool, tile_rows, 1, [&](int64_t tr0, int64_t tr1) {
    UnpackRows(chunks, cols, tr0 * kTileRows, tr1 * kTileRows, q.codes.data() + tr0 * kTileRows * cols,
               q.d.data() + tr0 * kTileRows * blocks, q.m.data() + tr0 * kTileRows * blocks);
  });
  return q;
}

absl::StatusOr<std::shared_ptr<Q4NXFile>> Q4NXFile::Open(const std::string& path) {
  auto file = SafetensorsFile::Open(path);
  if (!file.ok()) return absl::Status(file.status().code(), absl::StrCat("Q4NX file: ", file.status().message()));
  auto q = std::make_shared<Q4NXFile>();
  q->file_ = std::move(*file);
  return q;
}

absl::StatusOr<Q4_1Tensor> Q4NXFile::FindQ4_1(const std::string& name, int64_t rows, int64_t cols) const {
  const std::string where = absl::StrCat("Q4NX file '", file_->path(), "': ");
  const SafetensorsEntry* e = file_->Find(name);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat(where, "no tensor '", name, "'"));
  if (auto st = CheckGrid(absl::StrCat(where, "tensor '", name, "' wanted as"), rows, cols); !st.ok()) return st;
  if (e->dtype != "U8" && e->dtype != "I8") {
    return absl::InvalidArgumentError(absl::StrCat(where, "tensor '", name, "' is ", e->dtype, " ", ShapeText(e->shape),
                                                   ", not a quantised tensor (U8 chunks)"));
  }
  if (e->shape.size() != 2 && e->shape.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(where, "tensor '", name, "' has shape ", ShapeText(e->shape),
                                                   "; Q4NX chunks are [tiles, bytes] or [tile_rows, tile_cols, bytes]"));
  }
  const int64_t chunk = e->shape.back();
  if (chunk != static_cast<int64_t>(kChunkBytesQ4_1)) {
    const char* kind = chunk == static_cast<int64_t>(kChunkBytesQ4_K) ? "Q4_K" : chunk == static_cast<int64_t>(kChunkBytesQ8) ? "Q8" : nullptr;
    if (kind != nullptr) {
      return absl::UnimplementedError(absl::StrCat(where, "tensor '", name, "' has ", kind, " chunks (", chunk,
                                                   " bytes); only q4_1 (5120-byte chunks) is supported"));
    }
    return absl::InvalidArgumentError(absl::StrCat(where, "tensor '", name, "' has chunks of ", chunk,
                                                   " bytes, which is no Q4NX chunk kind (q4_1 5120, Q4_K 4736, Q8 8704)"));
  }
  const int64_t tile_rows = rows / kTileRows, tile_cols = cols / kTileCols;
  const bool fits = e->shape.size() == 3 ? e->shape[0] == tile_rows && e->shape[1] == tile_cols
                                         : e->shape[0] == tile_rows * tile_cols;
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(where, "tensor '", name, "' has shape ", ShapeText(e->shape), " but a ", rows,
                                                   " x ", cols, " weight is ", tile_rows, " x ", tile_cols, " tiles of 5120 bytes"));
  }
  return Q4_1Tensor{e->data, e->bytes, rows, cols};
}

absl::StatusOr<Q4_1Weights> Q4NXFile::ReadQ4_1(const std::string& name, int64_t rows, int64_t cols) const {
  auto t = FindQ4_1(name, rows, cols);
  if (!t.ok()) return t.status();
  return UnpackChunks(t->chunks, t->bytes, rows, cols);
}

absl::StatusOr<std::vector<float>> Q4NXFile::ReadPlain(const std::string& name, const std::vector<int64_t>& shape) const {
  const std::string where = absl::StrCat("Q4NX file '", file_->path(), "': ");
  const SafetensorsEntry* e = file_->Find(name);
  if (e == nullptr) return absl::NotFoundError(absl::StrCat(where, "no tensor '", name, "'"));
  if (e->dtype != "F32" && e->dtype != "BF16" && e->dtype != "F16") {
    return absl::InvalidArgumentError(absl::StrCat(where, "tensor '", name, "' is ", e->dtype, "; plain tensors are F32, BF16 or F16"));
  }
  if (e->shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat(where, "tensor '", name, "' has shape ", ShapeText(e->shape), ", expected ", ShapeText(shape)));
  }
  const size_t n = e->bytes / SafetensorsDTypeSize(e->dtype);  // the container checked bytes against the shape
  std::vector<float> out(n);
  if (e->dtype == "F32") {
    std::memcpy(out.data(), e->data, n * 4);
  } else {
    for (size_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, e->data + 2 * i, 2);
      out[i] = e->dtype == "BF16" ? Bf16ToF32(v) : F16ToF32(v);
    }
  }
  return out;
}

absl::StatusOr<SafetensorsOut> Q4_1Entry(const std::string& name, const Q4_1Weights& q) {
  auto chunks = PackChunks(q);
  if (!chunks.ok()) return absl::Status(chunks.status().code(), absl::StrCat("tensor '", name, "': ", chunks.status().message()));
  return SafetensorsOut{name, "U8", {q.rows / kTileRows, q.cols / kTileCols, static_cast<int64_t>(kChunkBytesQ4_1)}, std::move(*chunks)};
}

absl::StatusOr<SafetensorsOut> PlainEntry(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                                          const std::vector<float>& values) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  if (n != values.size()) return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': ", values.size(), " values for shape ", ShapeText(shape)));
  SafetensorsOut t{name, dtype, shape, {}};
  if (dtype == "F32") {
    t.bytes.resize(n * 4);
    std::memcpy(t.bytes.data(), values.data(), n * 4);
  } else if (dtype == "BF16") {
    t.bytes.resize(n * 2);
    for (size_t i = 0; i < n; ++i) {
      const uint16_t v = F32ToBf16(values[i]);
      std::memcpy(t.bytes.data() + 2 * i, &v, 2);
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': plain tensors are written as F32 or BF16, not ", dtype));
  }
  return t;
}

absl::Status WriteQ4NX(const std::string& path, const std::vector<SafetensorsOut>& tensors) {
  return WriteSafetensorsFile(path, tensors,
                              {{"format", "q4nx"}, {"quant", "q4_1"}, {"row_block", "32"}, {"col_block", "256"}});
}

}  // namespace oneinfer::q4nx
