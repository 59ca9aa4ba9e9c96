#include "engine/log.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace oneinfer {

LogLevel EffectiveLogLevel(LogLevel requested) {
  const char* env = std::getenv("ONEINFER_LOG");
  if (env == nullptr) return requested;
  const std::string v(env);
  if (v == "error") return LogLevel::kError;
  if (v == "warning") return LogLevel::kWarning;
  if (v == "info") return LogLevel::kInfo;
  if (v == "verbose") return LogLevel::kVerbose;
  return requested;  // an unknown value changes nothing
}

bool ProfileRequested() {
  const char* env = std::getenv("ONEINFER_PROFILE");
  return env != nullptr && env[0] != '\0' && std::strcmp(env, "0") != 0;
}

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kInfo: return "info";
    case LogLevel::kVerbose: return "verbose";
  }
  return "?";
}

void LogWrite(LogLevel level, std::string_view message) {
  const std::string prefix = std::string("oneinfer: ") + LogLevelName(level) + ": ";
  std::string out;
  size_t start = 0;
  while (start <= message.size()) {
    const size_t end = std::min(message.find('\n', start), message.size());
    out += prefix;
    out.append(message.substr(start, end - start));
    out += '\n';
    start = end + 1;
  }
  // One write per message, so lines of concurrent runs do not interleave mid-line.
  std::fwrite(out.data(), 1, out.size(), stderr);
}

}  // namespace oneinfer
