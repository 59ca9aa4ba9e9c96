// Trace and notice lines of the NPU leg: the kNpu category of the library's logger (base/log.h).
//
// Every routing decision writes one line (npu_qdq_host_rows, npu_qdq_fallback, npu_qdq_device);
// "the device ran this shape" is "neither npu_qdq_host_rows nor npu_qdq_fallback was written".
// Trace lines reach stderr only when the router's config says so (SessionOptions::npu.trace); notices (device missing, a design that
// cannot load) always reach stderr, and both always reach the registered sink.
#pragma once

#include <string_view>

#include "base/log.h"

namespace oneinfer::npu {

using TraceSink = LogSink;
inline TraceSink SetTraceSink(TraceSink sink) { return SetLogSink(LogCategory::kNpu, std::move(sink)); }
inline bool TraceEnabled(bool to_stderr) { return oneinfer::TraceEnabled(LogCategory::kNpu, to_stderr); }
inline void Trace(std::string_view line, bool to_stderr) { oneinfer::Trace(LogCategory::kNpu, line, to_stderr); }
inline void Notice(std::string_view line) { oneinfer::Notice(LogCategory::kNpu, line); }

// Captures every trace and notice line while alive (tests; one capture at a time).
class TraceCapture : public LogCapture {
 public:
  TraceCapture() : LogCapture(LogCategory::kNpu) {}
};

}  // namespace oneinfer::npu
