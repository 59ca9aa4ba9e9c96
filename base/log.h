// A tiny stderr logger: "oneinfer: <level>: message" lines at or above the session's level.
//
// Nothing here reads the environment: the level, the profile and the trace switches are the
// session's options (the command line translates ONEINFER_* variables into them).
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "oneinfer/common.h"

namespace oneinfer {

const char* LogLevelName(LogLevel level);
// Writes one "oneinfer: <level>: " line per line of `message`, in one write.
void LogWrite(LogLevel level, std::string_view message);
// Writes `message` when `level` is at or above the threshold `current` (kError is the highest).
inline void Log(LogLevel current, LogLevel level, std::string_view message) {
  if (static_cast<int>(level) <= static_cast<int>(current)) LogWrite(level, message);
}

// Trace lines: one machine-readable line per event of a subsystem ("qdq_group node=... k=...",
// "npu_qdq_device m=... design=..."). Every line reaches the category's sink (tests capture
// them); it reaches stderr only when its writer says so (to_stderr: the switch of the session the
// line belongs to, SessionOptions::qdq_trace or npu.trace). Sinks are process-wide. Notices (a
// device missing, a design that cannot load) always reach stderr as well.
enum class LogCategory { kQdq = 0, kNpu = 1 };
inline constexpr int kLogCategoryCount = 2;

using LogSink = std::function<void(std::string_view line)>;
// Installs sink for category c (empty to remove) and returns the previous one. Thread-safe.
LogSink SetLogSink(LogCategory c, LogSink sink);
// True when a trace line of c would go anywhere (to_stderr, or a sink is installed): lets callers
// skip formatting on hot paths.
bool TraceEnabled(LogCategory c, bool to_stderr = false);
// Writes line to c's sink, and to stderr when to_stderr.
void Trace(LogCategory c, std::string_view line, bool to_stderr = false);
void Notice(LogCategory c, std::string_view line);

// Captures every line of one category while alive (tests; one capture per category at a time),
// restoring the previous sink afterwards.
class LogCapture {
 public:
  explicit LogCapture(LogCategory c);
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::vector<std::string> lines() const;
  // Lines that start with prefix, e.g. "npu_qdq_fallback ".
  int Count(std::string_view prefix) const;
  void Clear();

 private:
  LogCategory category_;
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
  LogSink previous_;
};

}  // namespace oneinfer
