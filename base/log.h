// A tiny stderr logger: "oneinfer: <level>: message" lines at or above the session's level.
//
// The level comes from SessionOptions::log_level unless ONEINFER_LOG=error|warning|info|verbose
// overrides it; ONEINFER_PROFILE=1 turns on the per-run node timing profile at any level.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "oneinfer/common.h"

namespace oneinfer {

// `requested`, or the level ONEINFER_LOG names when it is set to a known level.
LogLevel EffectiveLogLevel(LogLevel requested);
// True when ONEINFER_PROFILE is set to something other than "" or "0".
bool ProfileRequested();
const char* LogLevelName(LogLevel level);
// Writes one "oneinfer: <level>: " line per line of `message`, in one write.
void LogWrite(LogLevel level, std::string_view message);
// Writes `message` when `level` is at or above the threshold `current` (kError is the highest).
inline void Log(LogLevel current, LogLevel level, std::string_view message) {
  if (static_cast<int>(level) <= static_cast<int>(current)) LogWrite(level, message);
}

// Trace lines: one machine-readable line per event of a subsystem ("qdq_group node=... k=...",
// "npu_qdq_device m=... design=..."). Every line reaches the category's sink (tests capture
// them); it reaches stderr only when the category is switched on. Notices (a device missing, a
// design that cannot load) always reach stderr as well.
enum class LogCategory { kQdq = 0, kNpu = 1 };
inline constexpr int kLogCategoryCount = 2;

using LogSink = std::function<void(std::string_view line)>;
// Installs sink for category c (empty to remove) and returns the previous one. Thread-safe.
LogSink SetLogSink(LogCategory c, LogSink sink);
// Switches c's trace lines to stderr on or off; returns the previous state.
bool SetTraceToStderr(LogCategory c, bool on);
// True when a trace line of c would go anywhere: lets callers skip formatting on hot paths.
bool TraceEnabled(LogCategory c);
void Trace(LogCategory c, std::string_view line);
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
