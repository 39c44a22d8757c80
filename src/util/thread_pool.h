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
    run(
        n_tasks, [](void* ctx, int task, int thread) { (*static_cast<F*>(ctx))(task, thread); },
        &fn);
  }

 private:
  using Call = void (*)(void* ctx, int task, int thread);
  void run(int n_tasks, Call call, void* ctx);
  void worker(int thread);
  void work(int thread, uint32_t generation);

  // A job, double-buffered by generation parity: a worker late from job g can still read slot
  // g & 1 safely while the next job (g + 1) is written into the other slot.
  struct Job {
    std::atomic<Call> call{nullptr};
    std::atomic<void*> ctx{nullptr};
    std::atomic<int> n_tasks{0};
  };

  int n_threads_;
  std::vector<std::thread> workers_;
  Job jobs_[2];
  // generation << 32 | next task index: a task is claimed by compare-and-swap only while the
  // generation is still the claimer's, so a worker late from one job never takes a task of the
  // next.
  alignas(64) std::atomic<uint64_t> next_{0};
  alignas(64) std::atomic<int> done_tasks_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};  // published last; workers wait on it
  std::atomic<bool> stop_{false};
};

}  // namespace util
