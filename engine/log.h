// A tiny stderr logger: "oneinfer: <level>: message" lines at or above the session's level.
//
// The level comes from SessionOptions::log_level unless ONEINFER_LOG=error|warning|info|verbose
// overrides it; ONEINFER_PROFILE=1 turns on the per-run node timing profile at any level.
#pragma once

#include <string_view>

#include "oneinfer/session.h"

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

}  // namespace oneinfer
