// util::ThreadPool — splits work across cores with no allocation and no locks per call.
//
// Passed explicitly to whoever needs it (never a singleton), so two engines can run side by
// side. Workers spin briefly between calls (decode issues an op every few microseconds), then
// sleep on a futex (std::atomic::wait) when idle.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace util {

class ThreadPool {
 public:
  // `n_threads` counts the calling thread: ThreadPool(2) starts one worker.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(task, thread) for every task in [0, n_tasks), spread over the threads; `thread` is
  // in [0, size()) and stable within a call (index per-thread scratch with it). Returns when
  // every task is done. Tasks are claimed dynamically, so uneven tasks balance out.
  template <class F>
  void parallel_for(int n_tasks, F&& fn) {
    if (n_tasks <= 0) return;
    if (n_threads_ == 1 || n_tasks == 1) {
      for (int t = 0; t < n_tasks; ++t) fn(t, 0);
      return;
    }
    run(n_tasks, [](void* ctx, int task, int thread) { (*static_cast<F*>(ctx))(task, thread); }, &fn);
  }

 private:
  using Call = void (*)(void* ctx, int task, int thread);
  void run(int n_tasks, Call call, void* ctx);
  void worker(int thread);
  void work(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The current job; published by bumping `generation_`.
  Call call_ = nullptr;
  void* ctx_ = nullptr;
  int n_tasks_ = 0;
  alignas(64) std::atomic<int> next_task_{0};
  alignas(64) std::atomic<int> done_tasks_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace util
