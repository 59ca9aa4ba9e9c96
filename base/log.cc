#include "base/log.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <utility>

namespace oneinfer {

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
  std::atomic<bool> has_sink[kLogCategoryCount] = {};  // the hot-path check
};

TraceState& State() {
  static TraceState state;
  return state;
}

void Emit(LogCategory c, std::string_view line, bool to_stderr) {
  TraceState& st = State();
  LogSink sink;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    sink = st.sinks[static_cast<int>(c)];
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
  st.has_sink[i].store(static_cast<bool>(st.sinks[i]), std::memory_order_relaxed);
  return prev;
}

bool TraceEnabled(LogCategory c, bool to_stderr) {
  return to_stderr || State().has_sink[static_cast<int>(c)].load(std::memory_order_relaxed);
}

void Trace(LogCategory c, std::string_view line, bool to_stderr) {
  if (TraceEnabled(c, to_stderr)) Emit(c, line, to_stderr);
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
