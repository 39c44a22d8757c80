// The engine thread: takes submissions and cancels between steps, steps the Scheduler while it
// has work, publishes the load gauges.
#include "server/engine_loop.h"

#include "util/log.h"

namespace server {

namespace {

const engine::SubmitResult kShuttingDown{-1, engine::Refusal::kQueueFull,
                                         "the server is shutting down"};

// The one place that reads load from the scheduler and the KV cache (both are changing: keep
// this glue here).
LoadSnapshot load_of(const engine::Scheduler& scheduler, const engine::Engine& engine) {
  const kv::Cache& cache = engine.cache();
  LoadSnapshot load{.running = scheduler.n_running(),
                    .waiting = scheduler.n_waiting(),
                    .kv_bytes_used = cache.bytes_in_use(),
                    .kv_bytes_total = cache.bytes_allocated(),
                    .kv_block_tokens = cache.config().block_cells,
                    .kv_groups = cache.usage(),
                    .counters = scheduler.counters(),
                    .max_lora = engine.adapters().limits().max_loras,
                    .running_adapters = scheduler.running_adapters(),
                    .waiting_adapters = scheduler.waiting_adapters()};
  // The pool a prefix index would use: the full-attention group's blocks (sliding rings hold a
  // window, not a prefix); with sliding layers only, the first group's.
  for (const kv::GroupGeometry& g : cache.groups()) {
    if (!g.sliding || load.kv_blocks == 0) load.kv_blocks = g.n_blocks;
    if (!g.sliding) break;
  }
  return load;
}

}  // namespace

EngineLoop::EngineLoop(engine::Engine& engine, int max_queue, ServerMetrics& metrics)
    : engine_(engine), metrics_(metrics), scheduler_(engine, {.max_queue = max_queue}) {
  metrics_.slots_total.set(engine.n_slots());
  publish_gauges();
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

void EngineLoop::submit(engine::Request request, Submitted submitted) {
  // The gauges are published before the client hears that its request ended, so a scrape made
  // after the last response never counts it as still holding a slot or KV.
  request.on_done = [this, done = std::move(request.on_done)](engine::FinishReason reason,
                                                              const engine::RequestStats& stats,
                                                              const std::string& error) {
    publish_gauges();
    if (done) done(reason, stats, error);
  };
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      submissions_.push_back({std::move(request), std::move(submitted)});
      submitted = nullptr;
    }
  }
  if (submitted) return submitted(kShuttingDown);
  wake_.notify_one();
}

void EngineLoop::cancel(int id) {
  {
    std::lock_guard lock(mutex_);
    cancels_.push_back(id);
  }
  wake_.notify_one();
}

void EngineLoop::run_task(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void EngineLoop::cancel_all() {
  {
    std::lock_guard lock(mutex_);
    cancel_all_ = true;
  }
  wake_.notify_one();
}

void EngineLoop::publish_gauges() {
  metrics_.publish_load(load_of(scheduler_, engine_));
}

void EngineLoop::take(std::vector<Submission>& submissions) {
  for (Submission& s : submissions) {
    // Tracks the id until the request is done, so cancel_all() reaches it.
    auto on_done = std::move(s.request.on_done);
    auto id = std::make_shared<int>(-1);
    s.request.on_done = [this, id, on_done = std::move(on_done)](engine::FinishReason reason,
                                                                 const engine::RequestStats& stats,
                                                                 const std::string& error) {
      live_.erase(*id);
      on_done(reason, stats, error);
    };
    const engine::SubmitResult result = scheduler_.submit(std::move(s.request));
    *id = result.id;
    if (result.refusal == engine::Refusal::kNone) live_.insert(result.id);
    s.submitted(result);
  }
}

void EngineLoop::run() {
  for (;;) {
    std::vector<Submission> submissions;
    std::vector<int> cancels;
    std::vector<std::function<void()>> tasks;
    bool cancel_all = false;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        return stopping_ || !submissions_.empty() || !cancels_.empty() || !tasks_.empty() ||
               cancel_all_ || !scheduler_.idle();
      });
      if (stopping_) break;
      submissions.swap(submissions_);
      cancels.swap(cancels_);
      tasks.swap(tasks_);
      cancel_all = std::exchange(cancel_all_, false);
    }
    for (auto& task : tasks) task();
    take(submissions);
    if (cancel_all) cancels.insert(cancels.end(), live_.begin(), live_.end());
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
  // Refuse what arrived during shutdown; the Scheduler's destructor cancels the rest. Tasks still
  // run: each answers a request of its own.
  std::vector<Submission> late;
  std::vector<std::function<void()>> tasks;
  {
    std::lock_guard lock(mutex_);
    late.swap(submissions_);
    tasks.swap(tasks_);
  }
  for (Submission& s : late) s.submitted(kShuttingDown);
  for (auto& task : tasks) task();
}

}  // namespace server
