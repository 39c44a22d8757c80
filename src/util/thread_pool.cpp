// ThreadPool: a generation counter publishes each job; tasks are claimed with one atomic add.
#include "util/thread_pool.h"

#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#define HR_CPU_RELAX() _mm_pause()
#else
#define HR_CPU_RELAX() ((void)0)
#endif

namespace util {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::work(int thread) {
  for (;;) {
    const int task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) return;
    call_(ctx_, task, thread);
    done_tasks_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadPool::run(int n_tasks, Call call, void* ctx) {
  call_ = call;
  ctx_ = ctx;
  n_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  done_tasks_.store(0, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes the job to the workers
  generation_.notify_all();
  work(0);
  while (done_tasks_.load(std::memory_order_acquire) < n_tasks) HR_CPU_RELAX();
}

void ThreadPool::worker(int thread) {
  uint32_t seen = 0;
  for (;;) {
    // Spin for a short while: the next op of a decode step usually follows within microseconds.
    uint32_t now = generation_.load(std::memory_order_acquire);
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    while (now == seen && std::chrono::steady_clock::now() < spin_until) {
      for (int i = 0; i < 64; ++i) HR_CPU_RELAX();
      now = generation_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load()) return;
    work(thread);
  }
}

}  // namespace util
