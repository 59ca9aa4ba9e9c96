// Intra-op thread pool shared by the heavy kernels (GEMM, conv, reductions).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace oneinfer {

class ThreadPool {
 public:
  // num_threads counts the calling thread: 1 means everything runs inline.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs fn(begin, end) over [0, n) split into at most num_threads() contiguous
  // chunks of at least min_chunk items; blocks until every chunk is done.
  void ParallelFor(int64_t n, int64_t min_chunk,
                   const std::function<void(int64_t, int64_t)>& fn);

  // Runs fn(i) for i in [0, tasks) concurrently; blocks until all are done.
  void RunTasks(int64_t tasks, const std::function<void(int64_t)>& fn);

 private:
  struct Impl;
  int num_threads_;
  std::unique_ptr<Impl> impl_;
};

// Null-safe helper: runs inline when pool is null.
inline void ParallelFor(ThreadPool* pool, int64_t n, int64_t min_chunk,
                        const std::function<void(int64_t, int64_t)>& fn) {
  if (pool == nullptr || pool->num_threads() <= 1 || n <= min_chunk) {
    if (n > 0) fn(0, n);
    return;
  }
  pool->ParallelFor(n, min_chunk, fn);
}

}  // namespace oneinfer
