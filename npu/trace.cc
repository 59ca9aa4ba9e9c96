#include "npu/trace.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

namespace oneinfer::npu {
namespace {

std::mutex& SinkMutex() {
  static std::mutex mu;
  return mu;
}

TraceSink& Sink() {
  static TraceSink sink;
  return sink;
}

bool TraceToStderr() {
  static const bool on = [] {
    const char* v = std::getenv("ONEINFER_NPU_TRACE");
    return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

void Emit(std::string_view line, bool to_stderr) {
  std::lock_guard<std::mutex> lock(SinkMutex());
  if (Sink()) Sink()(line);
  if (to_stderr) std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
}

}  // namespace

TraceSink SetTraceSink(TraceSink sink) {
  std::lock_guard<std::mutex> lock(SinkMutex());
  return std::exchange(Sink(), std::move(sink));
}

bool TraceEnabled() {
  if (TraceToStderr()) return true;
  std::lock_guard<std::mutex> lock(SinkMutex());
  return static_cast<bool>(Sink());
}

void Trace(std::string_view line) { Emit(line, TraceToStderr()); }

void Notice(std::string_view line) { Emit(line, true); }

TraceCapture::TraceCapture() {
  previous_ = SetTraceSink([this](std::string_view line) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(line);
  });
}

TraceCapture::~TraceCapture() { SetTraceSink(std::move(previous_)); }

std::vector<std::string> TraceCapture::lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lines_;
}

int TraceCapture::Count(std::string_view prefix) const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const std::string& l : lines_) n += std::string_view(l).substr(0, prefix.size()) == prefix;
  return n;
}

void TraceCapture::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  lines_.clear();
}

}  // namespace oneinfer::npu
