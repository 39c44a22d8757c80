// The HTTP layer (cpp-httplib) and the engine thread that owns the Scheduler.
#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "chat/template.h"
#include "engine/scheduler.h"
#include "sample/constraint.h"
#include "server/api.h"
#include "server/stop.h"
#include "telemetry/gpu_metrics.h"
#include "telemetry/nvml.h"
#include "util/log.h"

namespace server {

using nlohmann::json;
using Clock = engine::Clock;

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The series the server records, registered once so hot paths do no lookups.
struct Metrics {
  explicit Metrics(telemetry::Registry& r, const std::string& kv_device)
      : registry(r),
        ttft(r.histogram("headroom_time_to_first_token_seconds", "Time from request arrival to its first generated token.",
                         telemetry::latency_buckets())),
        inter_token(r.histogram("headroom_inter_token_latency_seconds", "Time between consecutive generated tokens of one request.",
                                telemetry::latency_buckets())),
        e2e(r.histogram("headroom_request_duration_seconds", "Time from request arrival to its last token.",
                        telemetry::latency_buckets())),
        queue(r.histogram("headroom_queue_time_seconds", "Time a request waited for a slot and KV room.",
                          telemetry::latency_buckets())),
        kv_used(r.gauge("headroom_kv_cache_bytes_used", "KV cache bytes held by running sequences.", {{"device", kv_device}})),
        kv_total(r.gauge("headroom_kv_cache_bytes_total", "KV cache bytes allocated.", {{"device", kv_device}})),
        active(r.gauge("headroom_requests_active", "Requests holding a slot (prefilling or decoding).")),
        queued(r.gauge("headroom_requests_queued", "Requests waiting for a slot.")),
        slots_total(r.gauge("headroom_slots_total", "Sequences the engine holds at once.")),
        slots_used(r.gauge("headroom_slots_used", "Slots held by running requests.")),
        prompt_tokens(r.counter("headroom_prompt_tokens_total", "Prompt tokens of admitted requests that finished.")),
        generated_tokens(r.counter("headroom_generated_tokens_total", "Tokens generated (end tokens included).")) {}

  telemetry::Counter& finished(engine::FinishReason reason) {
    return registry.counter("headroom_requests_total", "Requests that ran, by how they finished.",
                            {{"finish_reason", std::string(engine::finish_reason_name(reason))}});
  }
  telemetry::Counter& error(const std::string& type) {
    return registry.counter("headroom_errors_total", "Requests answered with an error, by type.", {{"type", type}});
  }

  telemetry::Registry& registry;
  telemetry::Histogram &ttft, &inter_token, &e2e, &queue;
  telemetry::Gauge &kv_used, &kv_total, &active, &queued, &slots_total, &slots_used;
  telemetry::Counter &prompt_tokens, &generated_tokens;
};

// One request's channel: the engine thread writes, the HTTP thread takes.
struct Exchange {
  std::mutex mutex;
  std::condition_variable changed;
  // Shown text not yet taken, one piece per generated token (empty while a stop string or a
  // partial UTF-8 character is held back), so a stream sends one chunk per token as OpenAI does.
  std::vector<std::string> pieces;
  std::vector<TokenLogprob> logprobs;  // not yet taken
  bool done = false;
  engine::FinishReason reason = engine::FinishReason::kNone;
  engine::RequestStats stats;
  std::string error;
};

// What the engine thread keeps per request while it generates.
struct Generation {
  Generation(const tokenizer::Tokenizer& tok, std::vector<std::string> stops) : decoder(tok), stop(std::move(stops)) {}
  tokenizer::StreamDecoder decoder;
  StopMatcher stop;
  Clock::time_point last_token;
};

// Owns the Scheduler on its own thread. submit() and cancel() are for the HTTP threads.
class EngineLoop {
 public:
  EngineLoop(engine::Engine& engine, int max_queue, Metrics& metrics)
      : engine_(engine), scheduler_(engine, {.max_queue = max_queue}), metrics_(metrics) {
    metrics_.slots_total.set(engine.n_slots());
    metrics_.kv_total.set(static_cast<double>(engine.cache().bytes_allocated()));
    thread_ = std::thread([this] { run(); });
  }
  ~EngineLoop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

  // Waits until the engine thread has taken (or refused) the request: between two steps.
  engine::SubmitResult submit(engine::Request request) {
    // The gauges are published before the client hears that its request ended, so a scrape
    // made after the last response never counts it as still holding a slot or KV.
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

  void cancel(int id) {
    {
      std::lock_guard lock(mutex_);
      cancels_.push_back(id);
    }
    wake_.notify_one();
  }

 private:
  void publish_gauges() {
    metrics_.active.set(scheduler_.n_running());
    metrics_.slots_used.set(scheduler_.n_running());
    metrics_.queued.set(scheduler_.n_waiting());
    metrics_.kv_used.set(static_cast<double>(engine_.cache().bytes_in_use()));
  }

  struct Submission {
    engine::Request request;
    std::promise<engine::SubmitResult> result;
  };

  void run() {
    for (;;) {
      std::vector<Submission*> submissions;
      std::vector<int> cancels;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !submissions_.empty() || !cancels_.empty() || !scheduler_.idle(); });
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
    for (Submission* s : submissions_) s->result.set_value({-1, engine::Refusal::kQueueFull, "the server is shutting down"});
    submissions_.clear();
  }

  engine::Engine& engine_;
  engine::Scheduler scheduler_;  // the engine thread's alone
  Metrics& metrics_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Submission*> submissions_;
  std::vector<int> cancels_;
  bool stopping_ = false;
  std::thread thread_;
};

std::string sse(const json& j) { return "data: " + j.dump() + "\n\n"; }

}  // namespace

struct Server::Impl {
  Impl(engine::Engine& e, const tokenizer::Tokenizer& t, ServerOptions o)
      : engine(e), tokenizer(t), options(std::move(o)), metrics(registry, kv_device_name(e.plan())) {}

  static std::string kv_device_name(const plan::Plan& plan) {
    for (const auto& item : plan.items) {
      if (item.kind == plan::ItemKind::kKvCache) {
        const std::string& name = plan.devices[item.device].name;
        return name.substr(0, name.find(' '));
      }
    }
    return "cpu";
  }

  void send_error(httplib::Response& res, const ApiError& e, const std::string& metric_type) {
    metrics.error(metric_type).inc();
    res.status = e.status;
    res.set_content(e.to_json().dump(), "application/json");
  }

  void handle_completion(const httplib::Request& req, httplib::Response& res, bool chat);
  void install_routes();

  engine::Engine& engine;
  const tokenizer::Tokenizer& tokenizer;
  ServerOptions options;
  telemetry::Registry registry;
  Metrics metrics;
  // GPU gauges, read on each /metrics scrape; without NVML there are none (said once at start).
  std::optional<telemetry::Nvml> nvml;
  telemetry::GpuMetrics gpu_metrics{registry};
  std::unique_ptr<EngineLoop> loop;
  httplib::Server http;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_id{0};
  int64_t created = 0;
  int bound_port = -1;
  int listen_socket = -1;  // captured when httplib creates it, to widen its backlog
};

namespace {

// The prompt tokens of a validated request, or the error naming the field that made it fail.
std::variant<std::vector<int32_t>, ApiError> prompt_tokens(const CompletionRequest& r, const tokenizer::Tokenizer& tok,
                                                           const std::string& chat_template) {
  if (!r.chat) {
    if (r.prompt_is_tokens) return r.prompt_tokens;
    // User text never becomes control tokens.
    return tok.encode(r.prompt_text, {.add_bos = true, .parse_special = false});
  }
  chat::RenderOptions render;
  render.bos_token = std::string(tok.token_text(tok.bos()));
  render.eos_token = std::string(tok.token_text(tok.eos()));
  auto text = chat::apply_chat_template(chat_template, r.messages, render);
  if (!text) return invalid_field("messages", text.error().message());
  // The rendered template carries its special tokens as text; BOS is not doubled.
  return tok.encode(*text, {.add_bos = true, .parse_special = true});
}

}  // namespace

void Server::Impl::handle_completion(const httplib::Request& req, httplib::Response& res, bool chat) {
  // Parsed once keeping key order: a response_format's properties are generated in the order the
  // schema lists them.
  nlohmann::ordered_json ordered;
  try {
    ordered = nlohmann::ordered_json::parse(req.body);
  } catch (const json::parse_error& e) {
    return send_error(res, invalid_field("", fmt::format("the request body is not valid JSON: {}", e.what())),
                      "invalid_request");
  }
  auto parsed = parse_request(json(ordered), chat, engine.spec().n_vocab);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e, "invalid_request");
  CompletionRequest r = std::move(std::get<CompletionRequest>(parsed));

  auto prompt = prompt_tokens(r, tokenizer, options.chat_template);
  if (auto* e = std::get_if<ApiError>(&prompt)) return send_error(res, *e, "invalid_request");

  // Structured output fails closed: a format the constraint cannot enforce is refused here.
  std::shared_ptr<sample::Constraint> constraint;
  if (!r.response_format.is_null()) {
    auto compiled = sample::compile_response_format(ordered["response_format"], tokenizer);
    if (!compiled) {
      ApiError e = invalid_field("response_format", compiled.error().message());
      e.code = "unsupported_response_format";
      return send_error(res, e, "unsupported_response_format");
    }
    constraint = std::move(*compiled);
  }

  auto exchange = std::make_shared<Exchange>();
  auto generation = std::make_shared<Generation>(tokenizer, r.stop);
  engine::Request request;
  request.prompt = std::move(std::get<std::vector<int32_t>>(prompt));
  request.max_tokens = r.max_tokens;
  request.sampling = r.sampling;
  request.end_ids = tokenizer.end_of_generation();
  if (!r.logit_bias.empty() || constraint) {
    request.constrain = [bias = r.logit_bias, constraint](std::span<float> logits, std::span<const int32_t> generated) {
      for (const auto& [id, b] : bias) logits[id] += b;
      if (constraint) constraint->mask(logits, generated);
    };
  }
  // Runs on the engine thread: decode, hold back possible stop strings, hand text over.
  const bool want_logprobs = r.logprobs;
  const tokenizer::Tokenizer* tok = &tokenizer;
  Metrics* m = &metrics;
  request.on_token = [=](int32_t token, float probability) {
    const Clock::time_point now = Clock::now();
    if (generation->last_token != Clock::time_point{}) {
      m->inter_token.observe(seconds_between(generation->last_token, now));
    }
    generation->last_token = now;
    if (tok->is_end_of_generation(token)) return true;  // the scheduler ends the request
    std::string shown = generation->stop.push(generation->decoder.push(token));
    {
      std::lock_guard lock(exchange->mutex);
      exchange->pieces.push_back(std::move(shown));
      if (want_logprobs) exchange->logprobs.push_back({tok->piece(token), std::log(probability)});
    }
    exchange->changed.notify_all();
    return !generation->stop.hit();
  };
  request.on_done = [=](engine::FinishReason reason, const engine::RequestStats& stats, const std::string& error) {
    std::string rest = generation->stop.push(generation->decoder.flush());
    rest += generation->stop.flush();
    m->finished(reason).inc();
    m->prompt_tokens.inc(stats.n_prompt);
    m->generated_tokens.inc(stats.n_generated);
    m->queue.observe(stats.queue_seconds());
    if (stats.first_token != Clock::time_point{}) m->ttft.observe(stats.ttft_seconds());
    m->e2e.observe(seconds_between(stats.submitted, stats.finished));
    {
      std::lock_guard lock(exchange->mutex);
      if (!rest.empty()) exchange->pieces.push_back(std::move(rest));
      exchange->done = true;
      exchange->reason = reason;
      exchange->stats = stats;
      exchange->error = error;
    }
    exchange->changed.notify_all();
  };

  const engine::SubmitResult submitted = loop->submit(std::move(request));
  switch (submitted.refusal) {
    case engine::Refusal::kNone: break;
    case engine::Refusal::kContextExceeded: {
      ApiError e = invalid_field(chat ? "messages" : "prompt", submitted.message);
      e.code = "context_length_exceeded";
      return send_error(res, e, "context_length_exceeded");
    }
    case engine::Refusal::kQueueFull: {
      res.set_header("Retry-After", "1");
      return send_error(res,
                        ApiError{.status = 503,
                                 .message = "the server is busy: " + submitted.message,
                                 .type = "server_error",
                                 .code = "queue_full"},
                        "queue_full");
    }
    case engine::Refusal::kInvalid:
      return send_error(res, invalid_field(chat ? "messages" : "prompt", submitted.message), "invalid_request");
  }

  const ResponseHeader header{.id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id++),
                              .created = static_cast<int64_t>(std::time(nullptr)),
                              .model = options.model_id,
                              .chat = chat};
  // The response is chunked either way: writing to the socket (or checking it while waiting) is
  // how a vanished client is noticed, and the releaser cancels whatever has not finished.
  struct Progress {
    bool role_sent = false;
    std::string text;  // non-streaming: the whole text
    std::vector<TokenLogprob> logprobs;
  };
  auto progress = std::make_shared<Progress>();
  const bool stream = r.stream, include_usage = r.include_usage;
  EngineLoop* engine_loop = loop.get();
  const int id = submitted.id;
  auto provider = [=, this](size_t, httplib::DataSink& sink) -> bool {
    std::vector<std::string> pieces;
    std::vector<TokenLogprob> logprobs;
    bool done;
    engine::FinishReason reason;
    engine::RequestStats stats;
    std::string error;
    {
      std::unique_lock lock(exchange->mutex);
      exchange->changed.wait_for(lock, std::chrono::milliseconds(50), [&] {
        return exchange->done || !exchange->pieces.empty() || !exchange->logprobs.empty();
      });
      pieces.swap(exchange->pieces);
      logprobs.swap(exchange->logprobs);
      done = exchange->done;
      reason = exchange->reason;
      stats = exchange->stats;
      error = exchange->error;
    }
    if (stopping) return false;
    if (!stream) {
      for (const std::string& piece : pieces) progress->text += piece;
      progress->logprobs.insert(progress->logprobs.end(), logprobs.begin(), logprobs.end());
      if (!done) return sink.is_writable();
      if (reason == engine::FinishReason::kError) {
        metrics.error("engine").inc();
        const std::string out =
            ApiError{.status = 500, .message = "generation failed: " + error, .type = "server_error"}.to_json().dump();
        if (!sink.write(out.data(), out.size())) return false;
      } else {
        const std::string out =
            completion_json(header, progress->text, want_logprobs ? &progress->logprobs : nullptr, reason,
                            {stats.n_prompt, stats.n_generated})
                .dump();
        if (!sink.write(out.data(), out.size())) return false;
      }
      sink.done();
      return true;
    }
    std::string out;
    if (chat && !progress->role_sent) {
      out += sse(chunk_json(header, "", true, nullptr, engine::FinishReason::kNone));
      progress->role_sent = true;
    }
    // One chunk per token with text; a token whose text is held back passes its logprob on to
    // the next chunk.
    std::vector<TokenLogprob> pending;
    size_t next_logprob = 0;
    for (const std::string& piece : pieces) {
      if (want_logprobs && next_logprob < logprobs.size()) pending.push_back(logprobs[next_logprob++]);
      if (piece.empty()) continue;
      out += sse(chunk_json(header, piece, false, want_logprobs ? &pending : nullptr, engine::FinishReason::kNone));
      pending.clear();
    }
    while (want_logprobs && next_logprob < logprobs.size()) pending.push_back(logprobs[next_logprob++]);
    if (!pending.empty()) out += sse(chunk_json(header, "", false, &pending, engine::FinishReason::kNone));
    if (done) {
      if (reason == engine::FinishReason::kError) {
        metrics.error("engine").inc();
        out += sse(ApiError{.status = 500, .message = "generation failed: " + error, .type = "server_error"}.to_json());
      } else {
        out += sse(chunk_json(header, "", false, nullptr, reason));
        if (include_usage) out += sse(usage_chunk_json(header, {stats.n_prompt, stats.n_generated}));
      }
      out += "data: [DONE]\n\n";
    }
    if (out.empty()) return sink.is_writable();
    if (!sink.write(out.data(), out.size())) return false;
    if (done) sink.done();
    return true;
  };
  auto releaser = [exchange, engine_loop, id, this](bool) {
    bool finished;
    {
      std::lock_guard lock(exchange->mutex);
      finished = exchange->done;
    }
    if (!finished) {
      metrics.error("client_disconnected").inc();
      engine_loop->cancel(id);
    }
  };
  if (stream) res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(stream ? "text/event-stream" : "application/json", provider, releaser);
}

void Server::Impl::install_routes() {
  http.set_payload_max_length(options.max_body_bytes);
  const int threads = options.http_threads > 0 ? options.http_threads
                                                : std::clamp(2 * (engine.n_slots() + options.max_queue), 16, 512);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };

  // /v1 requires the key when one is set; /health and /metrics stay open for probes.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options.api_key.empty() || !req.path.starts_with("/v1")) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + options.api_key) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    send_error(res,
               ApiError{.status = 401,
                        .message = "missing or wrong API key: send the header 'Authorization: Bearer KEY'",
                        .code = "invalid_api_key"},
               "unauthorized");
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib answers itself (413, 404, 400 on a bad request line) get the OpenAI shape too.
  http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                     httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e{.status = res.status};
    std::string type = "http_" + std::to_string(res.status);
    if (res.status == 413) {
      e.message = fmt::format("the request body is larger than the {} byte limit (--max-body)", options.max_body_bytes);
      type = "too_large";
    } else if (res.status == 404) {
      e.message = fmt::format("no route {} {}: see /v1/models, /v1/chat/completions, /v1/completions, /health, /metrics",
                              req.method, req.path);
      type = "not_found";
    } else {
      e.message = fmt::format("HTTP {}", res.status);
    }
    send_error(res, e, type);
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, ApiError{.status = 500, .message = "internal error: " + what, .type = "server_error"}, "internal");
  });

  http.Post("/v1/chat/completions",
            [this](const httplib::Request& req, httplib::Response& res) { handle_completion(req, res, true); });
  http.Post("/v1/completions",
            [this](const httplib::Request& req, httplib::Response& res) { handle_completion(req, res, false); });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json model = {{"id", options.model_id}, {"object", "model"}, {"created", created}, {"owned_by", "headroom"}};
    res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(), "application/json");
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const json health = {{"status", "ok"},
                         {"model", options.model_id},
                         {"slots_total", engine.n_slots()},
                         {"requests_active", metrics.active.value()},
                         {"requests_queued", metrics.queued.value()}};
    res.set_content(health.dump(), "application/json");
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    if (nvml) gpu_metrics.update(nvml->read_all());
    res.set_content(registry.expose(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  stop();
  impl_->loop.reset();  // cancels what is still running before the channels go away
}

util::Result<std::unique_ptr<Server>> Server::create(engine::Engine& engine, const tokenizer::Tokenizer& tokenizer,
                                                     ServerOptions options) {
  if (options.max_queue < 1) return util::errorf("--max-queue {}: must be at least 1", options.max_queue);
  if (options.port < 0 || options.port > 65535) return util::errorf("--port {}: must be 0 to 65535", options.port);
  if (options.max_body_bytes < 1024) return util::errorf("--max-body {}: must be at least 1024 bytes", options.max_body_bytes);
  HR_TRY(chat::Template::parse(options.chat_template));
  auto impl = std::make_unique<Impl>(engine, tokenizer, std::move(options));
  impl->created = static_cast<int64_t>(std::time(nullptr));
  if (auto nvml = telemetry::Nvml::open(); !nvml) {
    util::log_info("/metrics has no GPU gauges: {}", nvml.error().message());
  } else if (nvml->count() == 0) {
    util::log_info("/metrics has no GPU gauges: NVML reports no GPU");
  } else {
    impl->nvml = std::move(*nvml);
  }
  impl->loop = std::make_unique<EngineLoop>(engine, impl->options.max_queue, impl->metrics);
  impl->install_routes();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

util::Status Server::bind() {
  const auto& o = impl_->options;
  // Debian's compiled cpp-httplib listens with a backlog of 5: 32 clients connecting at once
  // overflow it and some connections break after the SYN retransmit. The socket is captured as
  // httplib creates it (keeping its default SO_REUSEADDR, but not SO_REUSEPORT, so a second
  // server on a taken port fails) and listen() is called again below with the system's maximum.
  impl_->http.set_socket_options([this](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    impl_->listen_socket = sock;
  });
  if (o.port == 0) {
    impl_->bound_port = impl_->http.bind_to_any_port(o.host);
  } else {
    impl_->bound_port = impl_->http.bind_to_port(o.host, o.port) ? o.port : -1;
  }
  if (impl_->bound_port >= 0 && impl_->listen_socket >= 0 && ::listen(impl_->listen_socket, SOMAXCONN) != 0) {
    return util::errorf("cannot widen the listen backlog of port {}: {}", impl_->bound_port, std::strerror(errno));
  }
  if (impl_->bound_port < 0) {
    return util::errorf("cannot listen on {}:{} — the port is taken or the address is not this machine's; pick "
                        "another with --host/--port",
                        o.host, o.port);
  }
  return {};
}

int Server::port() const { return impl_->bound_port; }

util::Status Server::run() {
  if (impl_->bound_port < 0) return util::errorf("Server::run before a successful bind");
  if (!impl_->http.listen_after_bind() && !impl_->stopping) {
    return util::errorf("the HTTP server on port {} stopped unexpectedly", impl_->bound_port);
  }
  return {};
}

void Server::stop() {
  impl_->stopping = true;
  impl_->http.stop();
}

telemetry::Registry& Server::metrics() { return impl_->registry; }

}  // namespace server
