#include "base/log.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

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

namespace {

struct TraceState {
  std::mutex mu;
  LogSink sinks[kLogCategoryCount];
  bool to_stderr[kLogCategoryCount] = {};
  std::atomic<bool> enabled[kLogCategoryCount] = {};  // sink installed or stderr on: the hot-path check

  TraceState() {
    // Interim: the environment's switches until the tools translate them into options.
    const char* vars[kLogCategoryCount] = {"ONEINFER_QDQ_DEBUG", "ONEINFER_NPU_TRACE"};
    for (int i = 0; i < kLogCategoryCount; ++i) {
      const char* v = std::getenv(vars[i]);
      to_stderr[i] = v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
      enabled[i] = to_stderr[i];
    }
  }
  void Refresh(int i) { enabled[i].store(to_stderr[i] || static_cast<bool>(sinks[i]), std::memory_order_relaxed); }
};

TraceState& State() {
  static TraceState state;
  return state;
}

void Emit(LogCategory c, std::string_view line, bool always_stderr) {
  TraceState& st = State();
  const int i = static_cast<int>(c);
  LogSink sink;
  bool to_stderr;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    sink = st.sinks[i];
    to_stderr = always_stderr || st.to_stderr[i];
  }
  if (sink) sink(line);
  if (to_stderr) {
    std::string out(line);
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stderr);
  }
}

}  // namespace

LogSink SetLogSink(LogCategory c, LogSink sink) {
  TraceState& st = State();
  const int i = static_cast<int>(c);
  std::lock_guard<std::mutex> lock(st.mu);
  LogSink prev = std::exchange(st.sinks[i], std::move(sink));
  st.Refresh(i);
  return prev;
}

bool SetTraceToStderr(LogCategory c, bool on) {
  TraceState& st = State();
  const int i = static_cast<int>(c);
  std::lock_guard<std::mutex> lock(st.mu);
  const bool prev = std::exchange(st.to_stderr[i], on);
  st.Refresh(i);
  return prev;
}

bool TraceEnabled(LogCategory c) { return State().enabled[static_cast<int>(c)].load(std::memory_order_relaxed); }

void Trace(LogCategory c, std::string_view line) {
  if (TraceEnabled(c)) Emit(c, line, false);
}

void Notice(LogCategory c, std::string_view line) { Emit(c, line, true); }

LogCapture::LogCapture(LogCategory c) : category_(c) {
  previous_ = SetLogSink(c, [this](std::string_view line) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(line);
  });
}

LogCapture::~LogCapture() { SetLogSink(category_, std::move(previous_)); }

std::vector<std::string> LogCapture::lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lines_;
}

int LogCapture::Count(std::string_view prefix) const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const std::string& l : lines_) n += std::string_view(l).substr(0, prefix.size()) == prefix;
  return n;
}

void LogCapture::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  lines_.clear();
}

}  // namespace oneinfer
