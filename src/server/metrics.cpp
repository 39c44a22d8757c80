// The server's Prometheus series and what a finished request adds to them.
#include "server/metrics.h"

#include <chrono>

namespace server {

ServerMetrics::ServerMetrics(telemetry::Registry& r, const std::string& kv_device)
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
      active(
          r.gauge("headroom_requests_active", "Requests holding a slot (prefilling or decoding).")),
      queued(r.gauge("headroom_requests_queued", "Requests waiting for a slot.")),
      slots_total(r.gauge("headroom_slots_total", "Sequences the engine holds at once.")),
      slots_used(r.gauge("headroom_slots_used", "Slots held by running requests.")),
      prompt_tokens(r.counter("headroom_prompt_tokens_total",
                              "Prompt tokens of admitted requests that finished.")),
      generated_tokens(r.counter("headroom_generated_tokens_total",
                                 "Tokens generated (end tokens included).")) {}

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
  generated_tokens.inc(stats.n_generated);
  queue.observe(stats.queue_seconds());
  if (stats.first_token != engine::Clock::time_point{}) ttft.observe(stats.ttft_seconds());
  e2e.observe(std::chrono::duration<double>(stats.finished - stats.submitted).count());
}

}  // namespace server
