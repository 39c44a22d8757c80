// The engine thread: takes submissions and cancels between steps, steps the Scheduler while it
// has work, publishes the slot, queue and KV gauges.
#include "server/engine_loop.h"

#include "util/log.h"

namespace server {

EngineLoop::EngineLoop(engine::Engine& engine, int max_queue, ServerMetrics& metrics)
    : engine_(engine), scheduler_(engine, {.max_queue = max_queue}), metrics_(metrics) {
  metrics_.slots_total.set(engine.n_slots());
  metrics_.kv_total.set(static_cast<double>(engine.cache().bytes_allocated()));
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

engine::SubmitResult EngineLoop::submit(engine::Request request) {
  // The gauges are published before the client hears that its request ended, so a scrape made
  // after the last response never counts it as still holding a slot or KV.
  request.on_done = [this, done = std::move(request.on_done)](engine::FinishReason reason,
                                                              const engine::RequestStats& stats,
                                                              const std::string& error) {
    publish_gauges();
    if (done) done(reason, stats, error);
  };
  Submission s{std::move(request), {}};
  auto result = s.result.get_future();
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return {-1, engine::Refusal::kQueueFull, "the server is shutting down"};
    submissions_.push_back(&s);
  }
  wake_.notify_one();
  return result.get();
}

void EngineLoop::cancel(int id) {
  {
    std::lock_guard lock(mutex_);
    cancels_.push_back(id);
  }
  wake_.notify_one();
}

void EngineLoop::publish_gauges() {
  metrics_.active.set(scheduler_.n_running());
  metrics_.slots_used.set(scheduler_.n_running());
  metrics_.queued.set(scheduler_.n_waiting());
  metrics_.kv_used.set(static_cast<double>(engine_.cache().bytes_in_use()));
}

void EngineLoop::run() {
  for (;;) {
    std::vector<Submission*> submissions;
    std::vector<int> cancels;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        return stopping_ || !submissions_.empty() || !cancels_.empty() || !scheduler_.idle();
      });
      if (stopping_) break;
      submissions.swap(submissions_);
      cancels.swap(cancels_);
    }
    for (Submission* s : submissions) s->result.set_value(scheduler_.submit(std::move(s->request)));
    for (int id : cancels) scheduler_.cancel(id);
    if (!scheduler_.idle()) {
      auto stepped = scheduler_.step();
      if (!stepped) {
        util::log_error("engine step failed: {}", stepped.error().message());
        metrics_.error("engine").inc();
      }
    }
    publish_gauges();
  }
  // Refuse what arrived during shutdown; the Scheduler's destructor cancels the rest.
  std::lock_guard lock(mutex_);
  for (Submission* s : submissions_)
    s->result.set_value({-1, engine::Refusal::kQueueFull, "the server is shutting down"});
  submissions_.clear();
}

}  // namespace server
