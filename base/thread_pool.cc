#include "base/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace oneinfer {

namespace {
// Decoding calls the pool hundreds of times per token with a few microseconds of other work in
// between: workers spin this long before sleeping, so a call rarely pays a futex wake-up.
constexpr auto kSpin = std::chrono::microseconds(200);

// Set while this thread runs a pool task: a call from inside one runs its tasks inline, in order
// (the same chunks as a parallel run, so the same results), instead of waiting on the pool.
thread_local bool t_in_task = false;

struct InTask {
  bool was = t_in_task;
  InTask() { t_in_task = true; }
  ~InTask() { t_in_task = was; }
};

struct Job {
  const std::function<void(int64_t)>* fn = nullptr;
  int64_t tasks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};

  void Work() {
    for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < tasks;) {
      (*fn)(i);
      done.fetch_add(1, std::memory_order_release);
    }
  }
};
}  // namespace

struct ThreadPool::Impl {
  std::mutex mu;  // guards job, sleepers, stop
  std::condition_variable wake;
  std::shared_ptr<Job> job;
  std::atomic<uint64_t> generation{0};
  int sleepers = 0;
  bool stop = false;
  std::mutex run_mu;  // one job at a time; a caller on another thread meanwhile runs inline
  std::vector<std::thread> workers;

  void WorkerLoop() {
    uint64_t seen = 0;
    for (;;) {
      const auto spin_until = std::chrono::steady_clock::now() + kSpin;
      int polls = 0;
      while (generation.load(std::memory_order_acquire) == seen) {
        _mm_pause();
        if (++polls % 64 == 0 && std::chrono::steady_clock::now() > spin_until) break;
      }
      std::shared_ptr<Job> current;
      {
        std::unique_lock<std::mutex> lock(mu);
        if (generation.load(std::memory_order_acquire) == seen && !stop) {
          ++sleepers;
          wake.wait(lock, [&] { return stop || generation.load(std::memory_order_acquire) != seen; });
          --sleepers;
        }
        if (stop) return;
        seen = generation.load(std::memory_order_acquire);
        current = job;
      }
      // A worker that arrives late finds next >= tasks and does nothing.
      if (current) {
        InTask in_task;
        current->Work();
      }
    }
  }
};

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  if (num_threads_ > 1) {
    impl_ = std::make_unique<Impl>();
    for (int i = 1; i < num_threads_; ++i) impl_->workers.emplace_back([this] { impl_->WorkerLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  if (!impl_) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  for (std::thread& t : impl_->workers) t.join();
}

void ThreadPool::RunTasks(int64_t tasks, const std::function<void(int64_t)>& fn) {
  if (tasks <= 0) return;
  auto inline_run = [&] {
    for (int64_t i = 0; i < tasks; ++i) fn(i);
  };
  if (!impl_ || tasks == 1 || t_in_task) return inline_run();
  std::unique_lock<std::mutex> running(impl_->run_mu, std::try_to_lock);
  if (!running.owns_lock()) return inline_run();
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->tasks = tasks;
  bool notify;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->job = job;
    impl_->generation.fetch_add(1, std::memory_order_release);
    notify = impl_->sleepers > 0;
  }
  if (notify) impl_->wake.notify_all();
  {
    InTask in_task;
    job->Work();  // the caller takes tasks too
  }
  while (job->done.load(std::memory_order_acquire) < tasks) _mm_pause();
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->job.reset();
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  int64_t chunks = std::min<int64_t>(num_threads_, (n + min_chunk - 1) / min_chunk);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  const int64_t step = (n + chunks - 1) / chunks;
  chunks = (n + step - 1) / step;
  RunTasks(chunks, [&](int64_t c) {
    const int64_t begin = c * step;
    fn(begin, std::min(n, begin + step));
  });
}

}  // namespace oneinfer
