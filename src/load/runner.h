// Drives an OpenAI-compatible endpoint: closed-loop workers sending streamed chat completions
// from a prompt mix, for a duration or a request count, after a warm-up.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "load/mix.h"
#include "load/server_metrics.h"
#include "load/stats.h"
#include "util/result.h"

namespace load {

// Where requests go: scheme://host:port and the path prefix before /chat/completions.
struct Endpoint {
  std::string origin;       // "http://127.0.0.1:8080"
  std::string api_prefix;   // "/v1" (a URL already ending in /v1 is not given another)
};
// Accepts http(s)://host[:port][/prefix]; the prefix gets /v1 appended unless it ends in /v1.
util::Result<Endpoint> parse_endpoint(const std::string& url);

struct LoadOptions {
  Endpoint endpoint;
  std::string model;    // empty: the first of GET /v1/models, else the field is left out
  std::string api_key;  // sent as "Authorization: Bearer KEY" when set
  Mix mix;
  int concurrency = 1;
  double duration = 0;  // seconds measured after the warm-up (duration mode when > 0)
  int64_t requests = 0;  // requests measured after the warm-up (request mode when > 0)
  double warmup = 0;    // seconds of traffic before the window, excluded from the statistics
  int max_tokens = 128;  // for mix items without their own max_tokens
  int retries = 0;      // extra attempts for connect, timeout, 429 and 5xx before any token
  double timeout = 120;  // seconds without a byte before a request counts as timed out
};

struct LoadRun {
  std::string model;  // the model sent (empty: none)
  std::vector<RequestRecord> records;
  double window_start = 0, window_end = 0;
  ServerMetrics server;  // what the server's /metrics said: its KV pool, preemptions
};

// The first model GET {prefix}/models lists: nullopt when the server answers without one (or
// without that route); an error when it cannot be reached at all.
util::Result<std::optional<std::string>> first_model(const Endpoint& endpoint,
                                                     const std::string& api_key, double timeout);

// Runs the load and returns every request's record. Fails only on bad options; request errors
// are recorded and counted, never fatal.
util::Result<LoadRun> run_load(const LoadOptions& options);

}  // namespace load
