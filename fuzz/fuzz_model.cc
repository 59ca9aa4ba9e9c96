// Fuzz target: a serialized ModelProto through Session::LoadFromBuffer (the loader, the graph
// passes, the plan and weight preparation), then one Run with every required input zero-filled.
// Any Status is fine; a crash, a sanitizer report, a leak or an exception is a finding.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "oneinfer/session.h"

namespace {

// Feeds larger than this are not built: the run would only measure the machine's memory.
constexpr int64_t kMaxFeedElements = int64_t{1} << 16;
// Nor may the run allocate more than this (a ConstantOfShape of 2.4 GB reached libFuzzer's 2 GB
// limit, scripts/fuzz.sh): past it a node fails with ResourceExhausted, which is the behaviour
// under test, instead of the fuzzer stopping on the allocation.
constexpr size_t kMaxRunBytes = size_t{256} << 20;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace oneinfer;
  SessionOptions options;
  options.num_threads = 1;
  options.log_level = LogLevel::kError;
  options.max_tensor_bytes = kMaxRunBytes;
  options.max_intermediate_bytes = kMaxRunBytes;
  // External data is looked up in a folder that does not exist: every location is refused or
  // not found, and nothing outside the input is read.
  auto session = Session::LoadFromBuffer(data, size, options, "/nonexistent/oneinfer-fuzz");
  if (!session.ok()) return 0;
  std::vector<Feed> feeds;
  for (const IOInfo& in : (*session)->inputs()) {
    if (in.has_default) continue;
    if (!in.is_tensor || in.dtype == DType::kUndefined) return 0;  // nothing sensible to feed
    Shape shape;
    int64_t elements = 1;
    for (int64_t d : in.shape) {
      const int64_t dim = d < 0 ? 1 : d;  // a symbolic dimension gets 1
      if (dim > kMaxFeedElements) return 0;
      elements *= dim;
      if (elements > kMaxFeedElements) return 0;
      shape.push_back(dim);
    }
    Tensor t = Tensor::Empty(in.dtype, shape);
    if (in.dtype != DType::kString && t.byte_size() > 0) std::memset(t.raw_data(), 0, t.byte_size());
    feeds.emplace_back(in.name, std::move(t));
  }
  auto outputs = (*session)->Run(feeds);
  (void)outputs;
  return 0;
}
