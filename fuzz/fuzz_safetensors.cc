// Fuzz target: the safetensors container reader (base/safetensors.h), every entry's bytes read.
#include <cstdint>

#include "base/safetensors.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  oneinfer::fuzz::MemFile file(data, size);
  auto st = oneinfer::SafetensorsFile::Open(file.path());
  if (!st.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const auto& [name, entry] : (*st)->tensors()) {
    // Open promised that the entry lies inside the mapping: ASan checks the first and last byte.
    if (entry.bytes > 0) sink = sink + entry.data[0] + entry.data[entry.bytes - 1];
    const size_t element = oneinfer::SafetensorsDTypeSize(entry.dtype);
    if (element == 0) continue;
    size_t elements = 1;
    for (int64_t d : entry.shape) elements *= static_cast<size_t>(d);
    if (elements * element != entry.bytes) __builtin_trap();  // Open checks exactly this
  }
  (void)(*st)->Find("x");
  return 0;
}
