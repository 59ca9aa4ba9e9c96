// Continuous batching for the server: one thread owns the BatchGenerator. Between two Steps it
// cancels the sequences whose clients went away and admits queued requests into free slots, so
// a new prompt's prefill runs in the same pass as the running sequences' decode.
//
// HTTP handler threads Submit a request and read its RequestStream: first the admission (or the
// reason it was refused), then one event per token, then the end.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "oneinfer/batch_generator.h"
#include "serve/metrics.h"

namespace oneinfer::serve {

class Scheduler;

struct StreamEvent {
  enum class Kind { kAdmitted, kToken, kFinished, kError };
  Kind kind = Kind::kError;
  int32_t token = 0;
  FinishReason finish = FinishReason::kNone;
  absl::Status error;  // kError: why the request was refused or failed
};

// One request's events, written by the scheduler and read by one handler thread.
class RequestStream {
 public:
  explicit RequestStream(Scheduler* owner) : owner_(owner) {}
  // Blocks until the next event. After kFinished or kError there are no more.
  StreamEvent Next();
  // The client went away or a stop string matched: the sequence ends at the next step and its
  // slot is freed. The reader must not call Next afterwards.
  void Cancel();
  bool cancelled() const { return cancelled_.load(); }

 private:
  friend class Scheduler;
  void Push(StreamEvent e);

  Scheduler* owner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  std::atomic<bool> cancelled_{false};
  // Scheduler thread only.
  std::chrono::steady_clock::time_point arrived_, last_token_;
  int64_t generated_ = 0;
};

class Scheduler {
 public:
  // max_queue: requests that may wait for a slot; one more is refused with ResourceExhausted.
  Scheduler(std::unique_ptr<BatchGenerator> batch, Metrics* metrics, int max_queue);
  ~Scheduler();  // Shutdown(true)

  // Queues a request. ResourceExhausted when the queue is full, Unavailable after Shutdown. A
  // prompt the generator refuses (too long, ids outside the vocabulary) comes back as the
  // stream's kError event.
  absl::StatusOr<std::shared_ptr<RequestStream>> Submit(std::vector<int32_t> prompt, SequenceOptions options);

  // Refuses new requests; queued ones are refused (Unavailable). Running sequences finish, or
  // with cancel_running end at the next step. Returns when the scheduler thread has stopped.
  void Shutdown(bool cancel_running);
  // Ends every running sequence at the next step (a second Ctrl-C while draining).
  void CancelRunning();

  int64_t context() const { return context_; }
  int64_t vocab_size() const { return vocab_; }
  int max_batch() const { return max_batch_; }

 private:
  friend class RequestStream;
  struct Pending {
    std::vector<int32_t> prompt;
    SequenceOptions options;
    std::shared_ptr<RequestStream> stream;
  };
  void Wake();
  void Loop();
  // Under mu_: cancels what the clients gave up, admits what fits.
  void CancelAndAdmit();
  void PublishGauges();

  std::unique_ptr<BatchGenerator> batch_;
  Metrics* metrics_;
  const int max_queue_;
  const int max_batch_;
  const int64_t context_, vocab_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  bool cancel_all_ = false;
  bool wake_ = false;
  int busy_ = 0;  // slots in use as of the last step, for Submit's queue check
  // Scheduler thread only: running sequences by BatchGenerator id.
  std::unordered_map<int64_t, std::shared_ptr<RequestStream>> running_;
  std::thread thread_;
};

}  // namespace oneinfer::serve
