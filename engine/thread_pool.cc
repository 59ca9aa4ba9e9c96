#include "engine/thread_pool.h"

#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/ThreadPool>

#include <algorithm>

namespace oneinfer {

struct ThreadPool::Impl {
  explicit Impl(int workers) : pool(workers) {}
  Eigen::ThreadPool pool;
};

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  if (num_threads_ > 1) impl_ = std::make_unique<Impl>(num_threads_ - 1);
}

ThreadPool::~ThreadPool() = default;

void ThreadPool::RunTasks(int64_t tasks, const std::function<void(int64_t)>& fn) {
  if (tasks <= 0) return;
  if (!impl_ || tasks == 1) {
    for (int64_t i = 0; i < tasks; ++i) fn(i);
    return;
  }
  // Task 0 runs on the caller so a 2-thread pool uses both cores without a handoff.
  Eigen::Barrier barrier(static_cast<unsigned>(tasks - 1));
  for (int64_t i = 1; i < tasks; ++i) {
    impl_->pool.Schedule([&fn, &barrier, i] {
      fn(i);
      barrier.Notify();
    });
  }
  fn(0);
  barrier.Wait();
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
