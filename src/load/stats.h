// What one load run measured (a record per request) and the statistics reported from it:
// percentiles, the measurement window after the warm-up, throughput and time series.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace load {

// One request as the client saw it; times are seconds since the start of the run.
struct RequestRecord {
  std::string item;                 // the mix item's name
  double start = 0;                 // when it was sent (its first attempt)
  double end = 0;                   // when its last attempt ended
  double ttft = -1;                 // first token − start (−1: none); includes retried attempts
  std::vector<double> token_times;  // arrival of each token-carrying chunk of the last attempt
  int64_t completion_tokens = 0;    // usage.completion_tokens, else token_times.size()
  int64_t prompt_tokens = -1;       // usage.prompt_tokens when reported
  int64_t cached_tokens = -1;       // usage.prompt_tokens_details.cached_tokens when reported
  bool usage_reported = false;
  std::string error;                // empty when it succeeded, else its kind (error_kinds)
  std::string error_detail;
  std::vector<std::string> retried;  // the error kind of each attempt that was retried
  bool ok() const { return error.empty(); }
};

// Error kinds: connect (refused, unreachable, connect timeout), timeout (no byte for --timeout),
// http_NNN (a non-200 status), stream_error (an {"error":…} event), malformed_stream (not SSE
// JSON chunks, or ended without [DONE]), disconnect (the connection broke mid-stream).

// The p-th percentile (0 < p ≤ 100) by nearest rank: the smallest sample with at least p% of
// the samples at or below it. `sorted` must be sorted ascending and non-empty.
double percentile_sorted(const std::vector<double>& sorted, double p);

struct Distribution {
  size_t count = 0;
  double mean = 0, min = 0, max = 0, p50 = 0, p95 = 0, p99 = 0;  // all 0 when count is 0
};
Distribution distribution(std::vector<double> samples);

// One bucket of the time series (the whole run, warm-up included, so the report can show it).
struct Bucket {
  double start = 0, end = 0;
  double tokens = 0;          // tokens that arrived in the bucket
  double tokens_per_second = 0;
  int completed = 0;          // requests that ended in it successfully
  int errors = 0;             // requests that ended in it with an error
};

struct Summary {
  double run_end = 0;                      // the last request's end
  double window_start = 0, window_end = 0;  // the measurement window
  int warmup_requests = 0;                 // started before the window: excluded from latencies
  int measured_requests = 0, succeeded = 0, failed = 0;
  Distribution ttft, itl, e2e;             // seconds, over measured successful requests
  Distribution stream_tokens_per_second;   // each measured success: (tokens−1) / (last−first token)
  double tokens_in_window = 0, total_tokens_per_second = 0;
  int64_t completion_tokens = 0, prompt_tokens = 0;  // summed over measured successes
  int64_t cached_tokens = 0;  // of the prompt tokens, served by the server's prefix cache
  Distribution ttft_cached, ttft_uncached;  // TTFT of requests with and without a cache hit
  std::map<std::string, int> errors;       // kind → measured requests that failed with it
  std::map<std::string, int> retries;      // kind → retried attempts (measured requests)
  std::vector<Bucket> series;
  double bucket_seconds = 0;
};

// Requests that start in [window_start, window_end) are measured; tokens count toward the
// throughput by arrival time inside the window (whichever request carried them), each chunk
// weighing completion_tokens / chunks of its request. bucket_seconds ≤ 0 picks 1 s, or more to
// keep at most 120 buckets.
Summary summarize(const std::vector<RequestRecord>& records, double window_start,
                  double window_end, double bucket_seconds = 0);

}  // namespace load
