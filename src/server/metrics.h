// server::ServerMetrics — the series the server records on /metrics, registered once so the hot
// paths (every token, every finished request) do no lookups.
#pragma once

#include <string>

#include "engine/request.h"
#include "telemetry/metrics.h"

namespace server {

struct ServerMetrics {
  ServerMetrics(telemetry::Registry& registry, const std::string& kv_device);

  telemetry::Counter& finished(engine::FinishReason reason);
  telemetry::Counter& error(const std::string& type);
  // A finished request's counts and latencies (queue, first token, end to end); a failed one
  // counts as an engine error.
  void record_finished(engine::FinishReason reason, const engine::RequestStats& stats);

  telemetry::Registry& registry;
  telemetry::Histogram &ttft, &inter_token, &e2e, &queue;
  telemetry::Gauge &kv_used, &kv_total, &active, &queued, &slots_total, &slots_used;
  telemetry::Counter &prompt_tokens, &generated_tokens;
};

}  // namespace server
