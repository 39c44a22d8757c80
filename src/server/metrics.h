// server::ServerMetrics — the series the server records on /metrics, registered once so the hot
// paths (every token, every finished request) do no lookups. The load gauges are published under
// headroom's names and under the names the Gateway API Inference Extension's endpoint picker reads
// for vLLM (its model-server protocol), so a pool of headroom replicas plugs in without flags.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/cache.h"
#include "telemetry/metrics.h"

namespace server {

// What the engine holds at one moment (read on the engine thread between steps).
struct LoadSnapshot {
  int running = 0;           // requests holding a slot
  int waiting = 0;           // requests queued for a slot or KV room
  size_t kv_bytes_used = 0;  // KV storage in blocks that sequences hold
  size_t kv_bytes_total = 0;
  int kv_block_tokens = 0;               // positions per KV block
  int kv_blocks = 0;                     // blocks in the pool (the full-attention group's)
  std::vector<kv::PoolUsage> kv_groups;  // each cache group's pool: blocks held, cached
  engine::SchedulerCounters counters;    // preemptions, prompt tokens and those the cache served
  int max_lora = 0;                      // LoRA adapters the engine holds at once
  std::vector<std::string> running_adapters, waiting_adapters;  // names, sorted
};

struct ServerMetrics {
  ServerMetrics(telemetry::Registry& registry, const std::string& kv_device,
                const std::string& model_name);

  telemetry::Counter& finished(engine::FinishReason reason);
  telemetry::Counter& error(const std::string& type);
  // A finished request's counts and latencies (queue, first token, end to end); a failed one
  // counts as an engine error.
  void record_finished(engine::FinishReason reason, const engine::RequestStats& stats);
  void publish_load(const LoadSnapshot& load);

  telemetry::Registry& registry;
  telemetry::Histogram &ttft, &inter_token, &e2e, &queue;
  telemetry::Gauge &kv_used, &kv_total, &kv_usage, &active, &queued, &slots_total, &slots_used,
      &http_connections;
  telemetry::Counter &prompt_tokens, &cached_tokens, &generated_tokens, &preemptions;
  telemetry::Counter &drafted_tokens, &accepted_tokens;  // speculative decoding
  telemetry::Gauge& prefix_hit_rate;
  // The endpoint picker's names (vLLM's): running and waiting requests, KV use 0–1 (under the
  // current name and the one older pickers read).
  telemetry::Gauge &vllm_running, &vllm_waiting, &vllm_kv_usage, &vllm_gpu_cache_usage;

 private:
  // headroom_kv_pool_blocks{group, state} of each cache group.
  void publish_pool(const std::vector<kv::PoolUsage>& groups);
  // vllm:lora_requests_info: one series, its labels the adapters now, its value when they last
  // changed (the endpoint picker reads the newest).
  void publish_lora(const LoadSnapshot& load);

  // [full, sliding] × [total, used, cached]
  std::array<std::array<telemetry::Gauge*, 3>, 2> pool_gauges_{};
  const std::string model_name_;
  int published_blocks_ = -1;      // the cache-config series are written once the pool is known
  telemetry::Labels lora_labels_;  // of the vllm:lora_requests_info series now exposed
};

}  // namespace server
