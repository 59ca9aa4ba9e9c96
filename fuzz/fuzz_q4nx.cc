// Fuzz target: the Q4NX weight-file reader (quant/q4nx.h): open, then each tensor read as a
// q4_1 weight of the size its shape implies and as a plain tensor of its own shape.
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "quant/q4nx.h"

namespace {

// Unpacking allocates rows * cols bytes: the fuzzer's small inputs never need more.
constexpr int64_t kMaxUnpackedElements = int64_t{1} << 22;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace oneinfer;
  fuzz::MemFile file(data, size);
  auto q = q4nx::Q4NXFile::Open(file.path());
  if (!q.ok()) return 0;
  for (const auto& [name, entry] : (*q)->container().tensors()) {
    const auto& s = entry.shape;
    int64_t rows = 0, cols = 0;
    if (s.size() == 3 && s[0] > 0 && s[1] > 0 && s[0] < (1 << 16) && s[1] < (1 << 16)) {
      rows = s[0] * q4nx::kTileRows;
      cols = s[1] * q4nx::kTileCols;
    } else if (s.size() == 2 && s[0] > 0 && s[0] < (1 << 16)) {
      rows = q4nx::kTileRows;
      cols = s[0] * q4nx::kTileCols;
    }
    if (rows > 0 && rows * cols <= kMaxUnpackedElements) {
      auto w = (*q)->ReadQ4_1(name, rows, cols);
      if (w.ok()) (void)q4nx::Dequantize(*w);
    }
    int64_t elements = 1;
    bool small = true;
    for (int64_t d : s) {
      if (d < 0 || d > kMaxUnpackedElements || (elements *= d) > kMaxUnpackedElements) small = false;
      if (!small) break;
    }
    if (small) (void)(*q)->ReadPlain(name, s);
  }
  return 0;
}
