// headroom load: drives an OpenAI-compatible endpoint with a prompt mix and reports TTFT,
// inter-token and end-to-end latency percentiles, tok/s over the window, errors and retries.
#include <cstdio>
#include <fstream>

#include "commands.h"
#include "load/report.h"
#include "load/runner.h"

namespace cli {

namespace {

util::Status write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) return util::errorf("cannot write {}", path);
  return {};
}

}  // namespace

void add_load(CLI::App& app, int& exit_code) {
  struct Options {
    std::string endpoint, model, api_key, mix, json_path, html_path;
    int concurrency = 1, max_tokens = 128, retries = 0;
    double duration = 0, warmup = 5, timeout = 120;
    int64_t requests = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "load",
      "Load-test an OpenAI-compatible endpoint with a prompt mix: TTFT, inter-token and "
      "end-to-end p50/p95/p99, tok/s over the window, errors; JSON and HTML reports");
  cmd->add_option("--endpoint", o->endpoint,
                  "Server base URL, e.g. http://127.0.0.1:8080 (/v1 is added unless present)")
      ->required();
  cmd->add_option("--model", o->model, "Model name to send (default: the first of GET /v1/models)");
  cmd->add_option("--api-key", o->api_key, "Sent as 'Authorization: Bearer KEY'");
  cmd->add_option("--mix", o->mix,
                  "Prompt mix, JSONL (default: the shipped bench/load/default-mix.jsonl; format "
                  "in docs/load.md)");
  cmd->add_option("-c,--concurrency", o->concurrency, "Concurrent streams (closed loop)")
      ->capture_default_str();
  auto* duration = cmd->add_option("--duration", o->duration,
                                   "Seconds to measure after the warm-up (default 60)");
  cmd->add_option("--requests", o->requests, "Requests to measure after the warm-up")
      ->excludes(duration);
  cmd->add_option("--warmup", o->warmup, "Seconds of traffic first, excluded from the statistics")
      ->capture_default_str();
  cmd->add_option("--max-tokens", o->max_tokens, "max_tokens for mix items that set none")
      ->capture_default_str();
  cmd->add_option("--retries", o->retries,
                  "Extra attempts per request on connect/timeout/429/5xx before the first token "
                  "(counted separately)")
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout, "Seconds without a byte before a request times out")
      ->capture_default_str();
  cmd->add_option("--json", o->json_path, "Write the full report (every request) as JSON here");
  cmd->add_option("--html", o->html_path, "Write a self-contained HTML report with charts here");
  cmd->callback([o, &exit_code] {
    auto fail = [&](const std::string& message, int code = kExitBadInput) {
      std::fprintf(stderr, "load: %s\n", message.c_str());
      exit_code = code;
    };
    load::LoadOptions options;
    auto endpoint = load::parse_endpoint(o->endpoint);
    if (!endpoint) return fail(endpoint.error().message());
    options.endpoint = *endpoint;
    auto mix = load::read_mix(o->mix.empty() ? shipped_file("bench/load/default-mix.jsonl") : o->mix);
    if (!mix) return fail(mix.error().message());
    options.mix = std::move(*mix);
    options.api_key = o->api_key;
    options.concurrency = o->concurrency;
    options.requests = o->requests;
    options.duration = o->requests > 0 || o->duration > 0 ? o->duration : 60;
    if (o->requests < 0 || o->duration < 0)
      return fail("--duration and --requests must be > 0");
    options.warmup = o->warmup;
    options.max_tokens = o->max_tokens;
    options.retries = o->retries;
    options.timeout = o->timeout;
    options.model = o->model;
    if (options.model.empty()) {
      auto listed = load::first_model(options.endpoint, options.api_key, options.timeout);
      if (!listed) return fail(listed.error().message(), kExitFailure);
      if (*listed) {
        options.model = **listed;
      } else {
        std::fprintf(stderr, "load: GET %s/models lists no model; sending requests without "
                             "\"model\" (give --model NAME if the server needs one)\n",
                     options.endpoint.api_prefix.c_str());
      }
    }
    auto run = load::run_load(options);
    if (!run) return fail(run.error().message());
    const load::Summary summary = load::summarize(run->records, run->window_start, run->window_end);
    const nlohmann::json report = load::report_json(options, *run, summary);
    std::printf("%s", load::report_text(report).c_str());
    if (!o->json_path.empty()) {
      auto written = write_file(
          o->json_path, report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
      if (!written.ok()) return fail(written.error().message(), kExitFailure);
    }
    if (!o->html_path.empty()) {
      auto written = write_file(o->html_path, load::report_html(report));
      if (!written.ok()) return fail(written.error().message(), kExitFailure);
    }
    // The run worked as a measurement; it failed as a test of the server if nothing succeeded.
    exit_code = summary.succeeded > 0 ? kExitOk : kExitFailure;
  });
}

}  // namespace cli
