// server::EngineLoop — the one thread that owns the engine::Scheduler. Handlers hand it requests,
// cancels and tasks (adapter loads) between steps, so no lock is held across a forward pass; it
// publishes the load gauges (/metrics, the inference gateway's) from the scheduler and the KV
// cache.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduler.h"
#include "server/metrics.h"

namespace server {

class EngineLoop {
 public:
  // Called on the engine thread once the scheduler has taken or refused a request.
  using Submitted = std::function<void(const engine::SubmitResult&)>;

  EngineLoop(engine::Engine& engine, int max_queue, ServerMetrics& metrics);
  // Stops the thread; the Scheduler's destructor cancels what is still running.
  ~EngineLoop();

  // Returns at once; the request joins between two steps.
  void submit(engine::Request request, Submitted submitted);
  void cancel(int id);
  // Every request taken and not yet finished (a drain's deadline).
  void cancel_all();
  // Runs `task` on the engine thread between two steps (what changes what a pass reads: loading
  // and unloading LoRA adapters); returns at once.
  void run_task(std::function<void()> task);

 private:
  struct Submission {
    engine::Request request;
    Submitted submitted;
  };
  void run();
  void take(std::vector<Submission>& submissions);
  void publish_gauges();

  engine::Engine& engine_;
  ServerMetrics& metrics_;
  std::set<int> live_;           // engine thread: ids taken and not yet done (outlives scheduler_)
  engine::Scheduler scheduler_;  // the engine thread's alone
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Submission> submissions_;
  std::vector<int> cancels_;
  std::vector<std::function<void()>> tasks_;
  bool cancel_all_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace server
