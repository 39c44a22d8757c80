// server::EngineLoop — the one thread that owns the engine::Scheduler. HTTP threads hand it
// requests and cancels between steps, so no lock is held across a forward pass.
#pragma once

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduler.h"
#include "server/metrics.h"

namespace server {

class EngineLoop {
 public:
  EngineLoop(engine::Engine& engine, int max_queue, ServerMetrics& metrics);
  // Stops the thread; the Scheduler's destructor cancels what is still running.
  ~EngineLoop();

  // Waits until the engine thread has taken (or refused) the request: between two steps.
  engine::SubmitResult submit(engine::Request request);
  void cancel(int id);

 private:
  struct Submission {
    engine::Request request;
    std::promise<engine::SubmitResult> result;
  };
  void run();
  // The slot, queue and KV gauges, from the engine thread.
  void publish_gauges();

  engine::Engine& engine_;
  engine::Scheduler scheduler_;  // the engine thread's alone
  ServerMetrics& metrics_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Submission*> submissions_;
  std::vector<int> cancels_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace server
