// The server's counters, gauges and histograms, rendered in the Prometheus text format
// (GET /metrics). Thread-safe: HTTP threads and the scheduler update it concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace oneinfer::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double v);
  // NAME_bucket{le=...} (cumulative), NAME_sum, NAME_count.
  void Render(const std::string& name, std::string* out) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  explicit Metrics(int kv_slots);

  // One answered HTTP request; path is one of the server's routes or "other".
  void CountRequest(const std::string& path, int status);
  void AddTokens(int64_t prompt, int64_t generated);
  void ObserveTimeToFirstToken(double seconds);
  void ObserveTokenLatency(double seconds);  // between two tokens of one sequence
  void ObserveBatch(int sequences);          // sequences in one forward pass
  // The scheduler's state after each step.
  void SetScheduler(int running, int queued, int slots_in_use);

  std::string Render() const;
  // For tests and the scheduler's checks.
  int running() const;
  int slots_in_use() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  Histogram ttft_, token_latency_, batch_;
  int running_ = 0, queued_ = 0, slots_in_use_ = 0;
  const int kv_slots_;
};

}  // namespace oneinfer::serve
