// Intra-op thread pool shared by the heavy kernels (GEMM, conv, reductions).
#pragma once

#include <algorithm>
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

// How a GEMM-like job of m_units x n_units blocks splits over `threads` tasks: the grid
// m x n (m * n <= threads) that minimises the largest task; ties split N, so each task
// streams its own slice of the weights once (what decoding is bound by).
struct TaskGrid {
  int64_t m = 1;
  int64_t n = 1;
};
inline TaskGrid ChooseTaskGrid(int64_t m_units, int64_t n_units, int64_t threads) {
  TaskGrid best;
  int64_t best_cost = m_units * n_units;
  for (int64_t n_split = 1; n_split <= std::min(threads, n_units); ++n_split) {
    const int64_t m_split = std::max<int64_t>(1, std::min(m_units, threads / n_split));
    const int64_t cost = ((m_units + m_split - 1) / m_split) * ((n_units + n_split - 1) / n_split);
    if (cost <= best_cost) {
      best_cost = cost;
      best = {m_split, n_split};
    }
  }
  return best;
}

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
