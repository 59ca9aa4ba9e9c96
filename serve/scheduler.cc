#include "serve/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace oneinfer::serve {

using Clock = std::chrono::steady_clock;

StreamEvent RequestStream::Next() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return !events_.empty(); });
  StreamEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void RequestStream::Push(StreamEvent e) {
  {
    std::lock_guard<std::mutex> l(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_one();
}

void RequestStream::Cancel() {
  if (!cancelled_.exchange(true)) owner_->Wake();
}

Scheduler::Scheduler(std::unique_ptr<BatchGenerator> batch, Metrics* metrics, int max_queue)
    : batch_(std::move(batch)),
      metrics_(metrics),
      max_queue_(max_queue),
      max_batch_(batch_->max_sequences()),
      context_(batch_->context()),
      vocab_(batch_->vocab_size()) {
  thread_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() { Shutdown(/*cancel_running=*/true); }

absl::StatusOr<std::shared_ptr<RequestStream>> Scheduler::Submit(std::vector<int32_t> prompt, SequenceOptions options) {
  auto stream = std::make_shared<RequestStream>(this);
  stream->arrived_ = Clock::now();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_) return absl::UnavailableError("the server is shutting down");
    // Requests beyond the free slots wait; past max_queue of them the client is told to retry.
    const int waiting = static_cast<int>(queue_.size());
    const int free_slots = max_batch_ - busy_;
    if (waiting - free_slots >= max_queue_) {
      return absl::ResourceExhaustedError(absl::StrCat("the queue is full (", max_queue_, " requests waiting); retry later"));
    }
    queue_.push_back({std::move(prompt), std::move(options), stream});
    wake_ = true;
  }
  cv_.notify_one();
  return stream;
}

void Scheduler::Wake() {
  {
    std::lock_guard<std::mutex> l(mu_);
    wake_ = true;
  }
  cv_.notify_one();
}

void Scheduler::Shutdown(bool cancel_running) {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
    cancel_all_ = cancel_all_ || cancel_running;
    wake_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::CancelRunning() {
  {
    std::lock_guard<std::mutex> l(mu_);
    cancel_all_ = true;
    wake_ = true;
  }
  cv_.notify_one();
}

void Scheduler::CancelAndAdmit() {
  for (auto& [id, stream] : running_) {
    if (cancel_all_ || stream->cancelled()) batch_->Cancel(id);
  }
  if (stopping_) {
    for (Pending& p : queue_) p.stream->Push({StreamEvent::Kind::kError, 0, FinishReason::kNone, absl::UnavailableError("the server is shutting down")});
    queue_.clear();
  }
  while (!queue_.empty() && batch_->active() < max_batch_) {
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    if (p.stream->cancelled()) continue;  // gave up while waiting
    const int64_t prompt_tokens = static_cast<int64_t>(p.prompt.size());
    auto id = batch_->Add(p.prompt, p.options);
    if (!id.ok()) {
      p.stream->Push({StreamEvent::Kind::kError, 0, FinishReason::kNone, id.status()});
      continue;
    }
    metrics_->AddTokens(prompt_tokens, 0);
    running_[*id] = p.stream;
    p.stream->Push({StreamEvent::Kind::kAdmitted, 0, FinishReason::kNone, absl::OkStatus()});
  }
  busy_ = batch_->active();
}

void Scheduler::PublishGauges() {
  int queued = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    queued = static_cast<int>(queue_.size());
    busy_ = batch_->active();
  }
  metrics_->SetScheduler(static_cast<int>(running_.size()), queued, batch_->active());
}

void Scheduler::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return wake_ || stopping_ || !running_.empty() || !queue_.empty(); });
      wake_ = false;
      CancelAndAdmit();
      if (stopping_ && running_.empty() && batch_->active() == 0) break;
    }
    PublishGauges();
    if (batch_->active() == 0) continue;
    auto events = batch_->Step();
    const Clock::time_point now = Clock::now();
    if (!events.ok()) {
      // A failed pass ends every active sequence (BatchGenerator::Step); tell their readers.
      for (auto& [id, stream] : running_) stream->Push({StreamEvent::Kind::kError, 0, FinishReason::kNone, events.status()});
      running_.clear();
      PublishGauges();
      continue;
    }
    metrics_->ObserveBatch(batch_->last_step().sequences);
    int64_t generated = 0;
    for (const SequenceEvent& e : *events) {
      auto it = running_.find(e.id);
      if (it == running_.end()) continue;
      RequestStream& s = *it->second;
      if (e.has_token) {
        ++generated;
        if (s.generated_++ == 0) {
          metrics_->ObserveTimeToFirstToken(std::chrono::duration<double>(now - s.arrived_).count());
        } else {
          metrics_->ObserveTokenLatency(std::chrono::duration<double>(now - s.last_token_).count());
        }
        s.last_token_ = now;
        s.Push({StreamEvent::Kind::kToken, e.token, FinishReason::kNone, absl::OkStatus()});
      }
      if (e.finish != FinishReason::kNone) {
        s.Push({StreamEvent::Kind::kFinished, 0, e.finish, absl::OkStatus()});
        running_.erase(it);
      }
    }
    metrics_->AddTokens(0, generated);
    PublishGauges();
  }
  PublishGauges();
}

}  // namespace oneinfer::serve
