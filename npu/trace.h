// Trace and notice lines of the NPU leg: one sink the tests can capture, stderr when asked.
//
// Every routing decision writes one line (npu_qdq_host_rows, npu_qdq_fallback, npu_qdq_device);
// "the device ran this shape" is "neither npu_qdq_host_rows nor npu_qdq_fallback was written".
// Trace lines reach stderr only with ONEINFER_NPU_TRACE=1; notices (device missing, a design that
// cannot load) always reach stderr, and both always reach the registered sink.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace oneinfer::npu {

using TraceSink = std::function<void(std::string_view line)>;

// Installs sink (empty to remove) and returns the previous one. Thread-safe.
TraceSink SetTraceSink(TraceSink sink);

// True when a trace line would go anywhere: lets callers skip formatting on the hot path.
bool TraceEnabled();

// A routing/timing line: to the sink, and to stderr when ONEINFER_NPU_TRACE=1.
void Trace(std::string_view line);

// A notice or error the user should see once: to the sink and always to stderr.
void Notice(std::string_view line);

// Captures every trace and notice line while alive (tests; one capture at a time), restoring the
// previous sink afterwards.
class TraceCapture {
 public:
  TraceCapture();
  ~TraceCapture();
  TraceCapture(const TraceCapture&) = delete;
  TraceCapture& operator=(const TraceCapture&) = delete;

  std::vector<std::string> lines() const;
  // Lines that start with prefix, e.g. "npu_qdq_fallback ".
  int Count(std::string_view prefix) const;
  void Clear();

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
  TraceSink previous_;
};

}  // namespace oneinfer::npu
