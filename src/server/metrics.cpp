// The server's Prometheus series, what a finished request adds to them, and the load gauges.
#include "server/metrics.h"

#include <chrono>
#include <ctime>

namespace server {

namespace {

telemetry::Labels model_label(const std::string& model_name) {
  return {{"model_name", model_name}};
}

}  // namespace

ServerMetrics::ServerMetrics(telemetry::Registry& r, const std::string& kv_device,
                             const std::string& model_name)
    : registry(r),
      ttft(r.histogram("headroom_time_to_first_token_seconds",
                       "Time from request arrival to its first generated token.",
                       telemetry::latency_buckets())),
      inter_token(r.histogram("headroom_inter_token_latency_seconds",
                              "Time between consecutive generated tokens of one request.",
                              telemetry::latency_buckets())),
      e2e(r.histogram("headroom_request_duration_seconds",
                      "Time from request arrival to its last token.",
                      telemetry::latency_buckets())),
      queue(r.histogram("headroom_queue_time_seconds",
                        "Time a request waited for a slot and KV room.",
                        telemetry::latency_buckets())),
      kv_used(r.gauge("headroom_kv_cache_bytes_used", "KV cache bytes held by running sequences.",
                      {{"device", kv_device}})),
      kv_total(r.gauge("headroom_kv_cache_bytes_total", "KV cache bytes allocated.",
                       {{"device", kv_device}})),
      kv_usage(r.gauge(
          "headroom_kv_cache_usage_ratio",
          "Share of the KV cache pool held by admitted sequences, 0 to 1 (used / total bytes).")),
      active(
          r.gauge("headroom_requests_active", "Requests holding a slot (prefilling or decoding).")),
      queued(r.gauge("headroom_requests_queued", "Requests waiting for a slot.")),
      slots_total(r.gauge("headroom_slots_total", "Sequences the engine holds at once.")),
      slots_used(r.gauge("headroom_slots_used", "Slots held by running requests.")),
      http_connections(
          r.gauge("headroom_http_connections", "Open HTTP connections (read at each scrape).")),
      prompt_tokens(r.counter("headroom_prompt_tokens_total",
                              "Prompt tokens of admitted requests that finished.")),
      cached_tokens(
          r.counter("headroom_prompt_tokens_cached_total",
                    "Of those, tokens whose KV came from the prefix cache instead of a prefill.")),
      generated_tokens(
          r.counter("headroom_generated_tokens_total", "Tokens generated (end tokens included).")),
      preemptions(r.counter("headroom_preemptions_total",
                            "Times a running sequence gave its KV blocks back for an older one "
                            "and resumed later.")),
      drafted_tokens(r.counter("headroom_draft_tokens_total",
                               "Tokens drafted for speculative decoding and verified, of requests "
                               "that finished.")),
      accepted_tokens(r.counter("headroom_draft_accepted_tokens_total",
                                "Of those, tokens the model kept (acceptance rate: this / "
                                "headroom_draft_tokens_total).")),
      prefix_hit_rate(r.gauge(
          "headroom_prefix_cache_hit_rate",
          "Prompt tokens reused from the prefix cache / prompt tokens admitted, since start.")),
      vllm_running(r.gauge("vllm:num_requests_running",
                           "Requests holding a slot (headroom_requests_active, under vLLM's name).",
                           model_label(model_name))),
      vllm_waiting(
          r.gauge("vllm:num_requests_waiting",
                  "Requests waiting for a slot (headroom_requests_queued, under vLLM's name).",
                  model_label(model_name))),
      vllm_kv_usage(r.gauge(
          "vllm:kv_cache_usage_perc",
          "KV cache usage, 1 = the whole pool (headroom_kv_cache_usage_ratio, under vLLM's name).",
          model_label(model_name))),
      vllm_gpu_cache_usage(r.gauge(
          "vllm:gpu_cache_usage_perc",
          "KV cache usage, 1 = the whole pool (vLLM's older name for vllm:kv_cache_usage_perc).",
          model_label(model_name))),
      model_name_(model_name) {
  // Present from the start, with no adapters yet: the endpoint picker's LoRA affinity then sees
  // none rather than a missing series.
  publish_lora({});
}

telemetry::Counter& ServerMetrics::finished(engine::FinishReason reason) {
  return registry.counter("headroom_requests_total", "Requests that ran, by how they finished.",
                          {{"finish_reason", std::string(engine::finish_reason_name(reason))}});
}

telemetry::Counter& ServerMetrics::error(const std::string& type) {
  return registry.counter("headroom_errors_total", "Requests answered with an error, by type.",
                          {{"type", type}});
}

void ServerMetrics::record_finished(engine::FinishReason reason,
                                    const engine::RequestStats& stats) {
  finished(reason).inc();
  if (reason == engine::FinishReason::kError) error("engine").inc();
  prompt_tokens.inc(stats.n_prompt);
  cached_tokens.inc(stats.n_cached);
  generated_tokens.inc(stats.n_generated);
  drafted_tokens.inc(stats.n_drafted);
  accepted_tokens.inc(stats.n_accepted);
  queue.observe(stats.queue_seconds());
  if (stats.first_token != engine::Clock::time_point{}) ttft.observe(stats.ttft_seconds());
  e2e.observe(std::chrono::duration<double>(stats.finished - stats.submitted).count());
}

void ServerMetrics::publish_load(const LoadSnapshot& load) {
  const auto one_scrape = registry.batch();  // the gauges below are read as one state
  const double usage = load.kv_bytes_total == 0 ? 0.0
                                                : static_cast<double>(load.kv_bytes_used) /
                                                      static_cast<double>(load.kv_bytes_total);
  active.set(load.running);
  slots_used.set(load.running);
  queued.set(load.waiting);
  kv_used.set(static_cast<double>(load.kv_bytes_used));
  kv_total.set(static_cast<double>(load.kv_bytes_total));
  kv_usage.set(usage);
  vllm_running.set(load.running);
  vllm_waiting.set(load.waiting);
  vllm_kv_usage.set(usage);
  vllm_gpu_cache_usage.set(usage);
  publish_pool(load.kv_groups);
  publish_lora(load);
  preemptions.inc(static_cast<double>(load.counters.preemptions) - preemptions.value());
  if (load.counters.prompt_tokens > 0) {
    prefix_hit_rate.set(static_cast<double>(load.counters.cached_tokens) /
                        static_cast<double>(load.counters.prompt_tokens));
  }
  if (load.kv_blocks == published_blocks_) return;
  published_blocks_ = load.kv_blocks;  // the pool is fixed: written once
  registry.gauge("headroom_kv_cache_block_size_tokens", "Positions per KV cache block.")
      .set(load.kv_block_tokens);
  registry
      .gauge("headroom_kv_cache_blocks",
             "Blocks in the KV cache pool (the full-attention layers').")
      .set(load.kv_blocks);
  registry
      .gauge("vllm:cache_config_info", "The KV cache's configuration, in labels (vLLM's name).",
             {{"block_size", std::to_string(load.kv_block_tokens)},
              {"num_gpu_blocks", std::to_string(load.kv_blocks)},
              {"model_name", model_name_}})
      .set(1);
}

void ServerMetrics::publish_lora(const LoadSnapshot& load) {
  auto join = [](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
    return out;
  };
  const telemetry::Labels labels = {{"max_lora", std::to_string(load.max_lora)},
                                    {"running_lora_adapters", join(load.running_adapters)},
                                    {"waiting_lora_adapters", join(load.waiting_adapters)}};
  if (labels == lora_labels_) return;
  static constexpr const char* kName = "vllm:lora_requests_info";
  if (!lora_labels_.empty()) registry.remove(kName, lora_labels_);
  registry
      .gauge(kName,
             "LoRA adapters: the most held at once, those of running and of waiting requests.",
             labels)
      .set(static_cast<double>(std::time(nullptr)));
  lora_labels_ = labels;
}

void ServerMetrics::publish_pool(const std::vector<kv::PoolUsage>& groups) {
  static constexpr const char* kStates[] = {"total", "used", "cached"};
  for (const kv::PoolUsage& g : groups) {
    auto& gauges = pool_gauges_[g.sliding ? 1 : 0];
    if (gauges[0] == nullptr) {  // registered once, when the pool is first seen
      for (int i = 0; i < 3; ++i) {
        gauges[i] =
            &registry.gauge("headroom_kv_pool_blocks",
                            "KV pool blocks by group and state: total, used (held by "
                            "running sequences), cached (holding a reusable prefix).",
                            {{"group", g.sliding ? "sliding" : "full"}, {"state", kStates[i]}});
      }
    }
    gauges[0]->set(g.n_blocks);
    gauges[1]->set(g.held);
    gauges[2]->set(g.cached);
  }
}

}  // namespace server
