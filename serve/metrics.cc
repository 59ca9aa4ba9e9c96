#include "serve/metrics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace oneinfer::serve {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();  // le: v <= bound
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::Render(const std::string& name, std::string* out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    absl::StrAppend(out, name, "_bucket{le=\"", bounds_[i], "\"} ", cumulative, "\n");
  }
  absl::StrAppend(out, name, "_bucket{le=\"+Inf\"} ", count_, "\n", name, "_sum ", sum_, "\n", name, "_count ", count_, "\n");
}

namespace {
std::vector<double> BatchBounds(int slots) {
  std::vector<double> b;
  for (int n = 1; n < slots; n *= 2) b.push_back(n);
  b.push_back(slots);
  return b;
}
void Header(std::string* out, const char* name, const char* type, const char* help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}
}  // namespace

Metrics::Metrics(int kv_slots)
    : ttft_({0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      token_latency_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}),
      batch_(BatchBounds(std::max(1, kv_slots))),
      kv_slots_(kv_slots) {}

void Metrics::CountRequest(const std::string& path, int status) {
  std::lock_guard<std::mutex> l(mu_);
  ++requests_[{path, status}];
}
void Metrics::AddTokens(int64_t prompt, int64_t generated) {
  std::lock_guard<std::mutex> l(mu_);
  prompt_tokens_ += prompt;
  generated_tokens_ += generated;
}
void Metrics::ObserveTimeToFirstToken(double s) {
  std::lock_guard<std::mutex> l(mu_);
  ttft_.Observe(s);
}
void Metrics::ObserveTokenLatency(double s) {
  std::lock_guard<std::mutex> l(mu_);
  token_latency_.Observe(s);
}
void Metrics::ObserveBatch(int sequences) {
  std::lock_guard<std::mutex> l(mu_);
  batch_.Observe(sequences);
}
void Metrics::SetScheduler(int running, int queued, int slots_in_use) {
  std::lock_guard<std::mutex> l(mu_);
  running_ = running;
  queued_ = queued;
  slots_in_use_ = slots_in_use;
}
int Metrics::running() const {
  std::lock_guard<std::mutex> l(mu_);
  return running_;
}
int Metrics::slots_in_use() const {
  std::lock_guard<std::mutex> l(mu_);
  return slots_in_use_;
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out;
  Header(&out, "oneinfer_requests_total", "counter", "HTTP requests answered, by route and status.");
  for (const auto& [key, n] : requests_) {
    absl::StrAppend(&out, "oneinfer_requests_total{path=\"", key.first, "\",status=\"", key.second, "\"} ", n, "\n");
  }
  Header(&out, "oneinfer_requests_running", "gauge", "Generation requests holding a sequence slot.");
  absl::StrAppend(&out, "oneinfer_requests_running ", running_, "\n");
  Header(&out, "oneinfer_queue_length", "gauge", "Generation requests waiting for a sequence slot.");
  absl::StrAppend(&out, "oneinfer_queue_length ", queued_, "\n");
  Header(&out, "oneinfer_kv_slots_in_use", "gauge", "KV cache slots held by running sequences.");
  absl::StrAppend(&out, "oneinfer_kv_slots_in_use ", slots_in_use_, "\n");
  Header(&out, "oneinfer_kv_slots_total", "gauge", "KV cache slots (--max-batch).");
  absl::StrAppend(&out, "oneinfer_kv_slots_total ", kv_slots_, "\n");
  Header(&out, "oneinfer_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.");
  absl::StrAppend(&out, "oneinfer_prompt_tokens_total ", prompt_tokens_, "\n");
  Header(&out, "oneinfer_generated_tokens_total", "counter", "Tokens generated.");
  absl::StrAppend(&out, "oneinfer_generated_tokens_total ", generated_tokens_, "\n");
  Header(&out, "oneinfer_time_to_first_token_seconds", "histogram", "From a request's arrival to its first token.");
  ttft_.Render("oneinfer_time_to_first_token_seconds", &out);
  Header(&out, "oneinfer_time_per_output_token_seconds", "histogram", "Between two tokens of one sequence.");
  token_latency_.Render("oneinfer_time_per_output_token_seconds", &out);
  Header(&out, "oneinfer_batch_size", "histogram", "Sequences in one forward pass.");
  batch_.Render("oneinfer_batch_size", &out);
  return out;
}

}  // namespace oneinfer::serve
