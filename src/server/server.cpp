// The OpenAI routes on the HTTP transport: auth and draining checked from the head, probes
// answered at once, completions built on a worker and answered as the engine generates them,
// every error in the OpenAI shape.
#include "server/server.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "chat/template.h"
#include "server/api.h"
#include "server/cors.h"
#include "server/engine_loop.h"
#include "server/http.h"
#include "server/json_body.h"
#include "server/metrics.h"
#include "server/request_builder.h"
#include "server/stream.h"
#include "server/token_routes.h"
#include "telemetry/gpu_metrics.h"
#include "telemetry/nvml.h"
#include "util/log.h"

namespace server {

using nlohmann::json;

namespace {

constexpr const char* kRoutes =
    "/v1/models, /v1/chat/completions, /v1/completions, /v1/load_lora_adapter, "
    "/v1/unload_lora_adapter, /tokenize, /detokenize, /apply-template, /health, /metrics";

bool utility_route(std::string_view path) {
  return path == "/tokenize" || path == "/detokenize" || path == "/apply-template";
}

bool lora_route(std::string_view path) {
  return path == "/v1/load_lora_adapter" || path == "/v1/unload_lora_adapter";
}

HttpResponse json_response(int status, const json& body) {
  return HttpResponse{
      .status = status, .content_type = "application/json", .body = dump_json(body)};
}

}  // namespace

struct Server::Impl {
  Impl(engine::Engine& e, const tokenizer::Tokenizer& t, ServerOptions o)
      : engine(e),
        tokenizer(t),
        options(std::move(o)),
        metrics(registry, kv_device_name(e.plan()), options.model_id) {}

  static std::string kv_device_name(const plan::Plan& plan) {
    for (const auto& item : plan.items) {
      if (item.kind == plan::ItemKind::kKvCache) {
        const std::string& name = plan.devices[item.device].name;
        return name.substr(0, name.find(' '));
      }
    }
    return "cpu";
  }

  HttpResponse error_response(const ApiError& e, const std::string& metric_type) {
    metrics.error(metric_type).inc();
    HttpResponse r = json_response(e.status, e.to_json());
    if (e.status == 503) r.headers.emplace_back("Retry-After", "1");
    return r;
  }

  HttpRoutes routes();
  std::optional<HttpResponse> screen(const HttpRequestHead& head);
  std::optional<HttpResponse> probe(const HttpRequest& request);
  void handle(const HttpRequest& request, const std::shared_ptr<Reply>& reply);
  void handle_completion(const HttpRequest& request, const std::shared_ptr<Reply>& reply,
                         bool chat);
  // llama-server's /tokenize, /detokenize and /apply-template (token_routes.h).
  void handle_utility(const HttpRequest& request, const std::shared_ptr<Reply>& reply);
  // vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter, run on the engine thread.
  void handle_lora(const HttpRequest& request, const std::shared_ptr<Reply>& reply);
  std::vector<std::string> adapter_names() const;

  // Requests between arrival and their response's end: a drain waits for them.
  struct InFlight {
    explicit InFlight(Impl& s) : server(s) { ++server.in_flight; }
    ~InFlight() {
      if (--server.in_flight == 0) {
        std::lock_guard lock(server.drain_mutex);
        server.drained.notify_all();
      }
    }
    Impl& server;
  };

  engine::Engine& engine;
  const tokenizer::Tokenizer& tokenizer;
  ServerOptions options;
  telemetry::Registry registry;
  ServerMetrics metrics;
  CorsPolicy cors{options.cors_origins};
  // GPU gauges, read on each /metrics scrape; without NVML there are none (said once at start).
  std::optional<telemetry::Nvml> nvml;
  telemetry::GpuMetrics gpu_metrics{registry};
  // The transport outlives the engine loop: a request the loop cancels as it goes still wakes its
  // (stopped) connection.
  std::unique_ptr<HttpServer> http;
  std::unique_ptr<EngineLoop> loop;
  std::atomic<bool> draining{false};
  std::atomic<int> in_flight{0};
  std::mutex drain_mutex;
  std::condition_variable drained;
  std::atomic<uint64_t> next_id{0};
  int64_t created = 0;
};

HttpRoutes Server::Impl::routes() {
  return HttpRoutes{
      .screen = [this](const HttpRequestHead& head) { return screen(head); },
      .probe = [this](const HttpRequest& request) { return probe(request); },
      .handle = [this](HttpRequest request,
                       std::shared_ptr<Reply> reply) { handle(request, reply); },
      .headers =
          [this](const HttpRequestHead& head) {
            HttpHeaders headers;
            const std::string origin = cors.allow_origin(head.header("Origin"));
            if (!origin.empty()) {
              headers = {{"Access-Control-Allow-Origin", origin}, {"Vary", "Origin"}};
            }
            return headers;
          },
      .error =
          [this](int status, const std::string& message, const std::string& type) {
            return error_response(
                ApiError{.status = status,
                         .message = message,
                         .type = status >= 500 ? "server_error" : "invalid_request_error",
                         .code = type},
                type);
          },
  };
}

// Decided from the head alone, so a refused request's body is never read.
std::optional<HttpResponse> Server::Impl::screen(const HttpRequestHead& head) {
  const std::string_view path = head.path();
  if (path == "/health" || path == "/metrics") return std::nullopt;
  // A browser's preflight from an allowed origin, answered without the API key it never carries.
  if (head.method == "OPTIONS" && !cors.allow_origin(head.header("Origin")).empty()) {
    return HttpResponse{.status = 204,
                        .headers = {{"Access-Control-Allow-Methods", CorsPolicy::kAllowMethods},
                                    {"Access-Control-Allow-Headers", CorsPolicy::kAllowHeaders},
                                    {"Access-Control-Max-Age", CorsPolicy::kMaxAgeSeconds}}};
  }
  const bool post = head.method == "POST";
  const bool known = ((path == "/v1/chat/completions" || path == "/v1/completions" ||
                       utility_route(path) || lora_route(path)) &&
                      post) ||
                     (path == "/v1/models" && (head.method == "GET" || head.method == "HEAD"));
  if (!known) {
    return error_response(
        ApiError{.status = 404,
                 .message = fmt::format("no route {} {}: see {}", head.method, path, kRoutes)},
        "not_found");
  }
  if (!options.api_key.empty() && head.header("Authorization") != "Bearer " + options.api_key) {
    return error_response(
        ApiError{.status = 401,
                 .message = "missing or wrong API key: send the header 'Authorization: Bearer KEY'",
                 .code = "invalid_api_key"},
        "unauthorized");
  }
  if (draining) {
    return error_response(
        ApiError{.status = 503,
                 .message = "the server is shutting down: send the request to another replica",
                 .type = "server_error",
                 .code = "draining"},
        "draining");
  }
  return std::nullopt;
}

std::optional<HttpResponse> Server::Impl::probe(const HttpRequest& request) {
  const std::string_view path = request.head.path();
  const bool get = request.head.method == "GET" || request.head.method == "HEAD";
  if (path == "/health" && get) {
    // 503 while draining, so a balancer's health check takes this replica out.
    const json health = {{"status", draining ? "draining" : "ok"},
                         {"model", options.model_id},
                         {"slots_total", engine.n_slots()},
                         {"requests_active", metrics.active.value()},
                         {"requests_queued", metrics.queued.value()}};
    return json_response(draining ? 503 : 200, health);
  }
  if (path == "/metrics" && get) {
    if (nvml) gpu_metrics.update(nvml->read_all());
    metrics.http_connections.set(http ? http->open_connections() : 0);
    return HttpResponse{.content_type = "text/plain; version=0.0.4; charset=utf-8",
                        .body = registry.expose()};
  }
  if (path == "/health" || path == "/metrics") {
    return error_response(ApiError{.status = 405, .message = fmt::format("{} takes GET", path)},
                          "not_found");
  }
  return std::nullopt;
}

void Server::Impl::handle(const HttpRequest& request, const std::shared_ptr<Reply>& reply) {
  const std::string_view path = request.head.path();
  if (path == "/v1/chat/completions") return handle_completion(request, reply, true);
  if (path == "/v1/completions") return handle_completion(request, reply, false);
  if (utility_route(path)) return handle_utility(request, reply);
  if (lora_route(path)) return handle_lora(request, reply);
  // screen() lets nothing else through but /v1/models: the base model, then each adapter with
  // the base as its parent, as vLLM lists them.
  json data = json::array({json{{"id", options.model_id},
                                {"object", "model"},
                                {"created", created},
                                {"owned_by", "headroom"},
                                {"root", options.model_id},
                                {"parent", nullptr}}});
  for (const engine::AdapterInfo& a : engine.adapters().list()) {
    data.push_back({{"id", a.name},
                    {"object", "model"},
                    {"created", created},
                    {"owned_by", "headroom"},
                    {"root", a.path},
                    {"parent", options.model_id}});
  }
  reply->send(json_response(200, json{{"object", "list"}, {"data", data}}));
}

std::vector<std::string> Server::Impl::adapter_names() const {
  std::vector<std::string> names;
  for (const engine::AdapterInfo& a : engine.adapters().list()) names.push_back(a.name);
  return names;
}

void Server::Impl::handle_lora(const HttpRequest& request, const std::shared_ptr<Reply>& reply) {
  auto body = parse_json_body(request.body);
  if (auto* e = std::get_if<ApiError>(&body))
    return reply->send(error_response(*e, "invalid_request"));
  const auto& b = std::get<nlohmann::ordered_json>(body);
  const bool load = request.head.path() == "/v1/load_lora_adapter";
  auto text_field = [&](const char* name) -> std::optional<std::string> {
    const auto it = b.find(name);
    if (it == b.end() || !it->is_string() || it->get<std::string>().empty()) return std::nullopt;
    return it->get<std::string>();
  };
  const auto name = text_field("lora_name");
  const auto path = text_field("lora_path");
  if (!b.is_object() || !name || (load && !path)) {
    return reply->send(
        error_response(invalid_field(name ? "lora_path" : "lora_name",
                                     load ? "give {\"lora_name\": NAME, \"lora_path\": FILE.gguf}"
                                          : "give {\"lora_name\": NAME}"),
                       "invalid_request"));
  }
  float scale = 1.0f;
  if (const auto it = b.find("lora_scale"); load && it != b.end()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()))
      return reply->send(
          error_response(invalid_field("lora_scale", "must be a number"), "invalid_request"));
    scale = it->get<float>();
  }
  if (*name == options.model_id) {
    return reply->send(error_response(
        invalid_field("lora_name", fmt::format("'{}' is the base model's name", *name)),
        "invalid_request"));
  }
  // Loading and unloading change what a pass reads: the engine thread does it between steps.
  loop->run_task([this, reply, load, name = *name, path = path.value_or(""), scale] {
    util::Status done;
    if (load) {
      if (auto loaded = engine.adapters().load(name, path, scale); !loaded)
        done = std::move(loaded).error();
    } else {
      done = engine.adapters().unload(name);
    }
    if (!done) {
      const bool unknown = !load;
      util::log_info("{} LoRA adapter '{}': {}", load ? "loading" : "unloading", name,
                     done.error().message());
      return reply->send(
          error_response(ApiError{.status = unknown ? 404 : 400,
                                  .message = done.error().message(),
                                  .type = unknown ? "NotFoundError" : "invalid_request_error",
                                  .param = load ? "lora_path" : "lora_name",
                                  .code = unknown ? "lora_not_found" : "lora_load_failed"},
                         unknown ? "lora_not_found" : "lora_load_failed"));
    }
    util::log_info("{} LoRA adapter '{}'{}", load ? "loaded" : "unloaded", name,
                   load ? " from " + path : "");
    reply->send(HttpResponse{.status = 200,
                             .content_type = "text/plain; charset=utf-8",
                             .body = fmt::format("Success: LoRA adapter '{}' {} successfully.",
                                                 name, load ? "added" : "removed")});
  });
}

void Server::Impl::handle_completion(const HttpRequest& http_request,
                                     const std::shared_ptr<Reply>& reply, bool chat) {
  auto in_flight_token = std::make_shared<InFlight>(*this);
  auto body = parse_json_body(http_request.body);
  if (auto* e = std::get_if<ApiError>(&body))
    return reply->send(error_response(*e, "invalid_request"));
  auto parsed =
      parse_request(std::get<nlohmann::ordered_json>(body), chat, engine.spec().n_vocab);
  if (auto* e = std::get_if<ApiError>(&parsed))
    return reply->send(error_response(*e, "invalid_request"));
  const CompletionRequest& r = std::get<CompletionRequest>(parsed);
  auto resolved = resolve_model(r, options.model_id, adapter_names(), options.any_model);
  if (auto* e = std::get_if<ApiError>(&resolved))
    return reply->send(error_response(*e, error_metric_type(*e)));
  const std::string adapter = std::get<std::string>(resolved);

  auto built = build_engine_requests(r, {tokenizer, options.chat_template, metrics, engine});
  if (auto* e = std::get_if<ApiError>(&built))
    return reply->send(error_response(*e, error_metric_type(*e)));
  BuiltRequest& b = std::get<BuiltRequest>(built);
  for (engine::Request& choice : b.choices) {
    choice.adapter = adapter;
    choice.adapter_scale = r.lora_scale;
  }
  for (const auto& channel : b.channels) channel->set_listener([reply] { reply->wake(); });
  ResponseWriter writer(
      ResponseHeader{.id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id++),
                     .created = static_cast<int64_t>(std::time(nullptr)),
                     .model = adapter.empty() ? options.model_id : adapter,
                     .chat = chat},
      r.stream, r.include_usage, r.n, b.reply, r.logprobs);
  // The choices are answered together or not at all: once the scheduler has taken or refused
  // each (on the engine thread), the response follows them, or a refusal cancels those taken.
  struct Gathering {
    std::mutex mutex;
    int pending = 0;
    std::vector<int> ids;
    std::optional<engine::SubmitResult> refused;
  };
  auto gathering = std::make_shared<Gathering>();
  gathering->pending = static_cast<int>(b.choices.size());
  auto source = std::make_shared<CompletionSource>(
      b.channels, std::move(writer), [this, gathering, in_flight_token] {
        metrics.error("client_disconnected").inc();
        std::lock_guard lock(gathering->mutex);
        for (int id : gathering->ids) loop->cancel(id);
      });
  for (engine::Request& request : b.choices) {
    loop->submit(std::move(request), [this, reply, chat, gathering, source,
                                      in_flight_token](const engine::SubmitResult& s) {
      std::unique_lock lock(gathering->mutex);
      if (s.refusal != engine::Refusal::kNone) {
        if (!gathering->refused) gathering->refused = s;
      } else {
        gathering->ids.push_back(s.id);
      }
      if (--gathering->pending > 0) return;
      if (gathering->refused) {
        for (int id : gathering->ids) loop->cancel(id);
        lock.unlock();
        const ApiError e = refusal_error(*gathering->refused, chat);
        return reply->send(error_response(e, error_metric_type(e)));
      }
      lock.unlock();
      reply->follow(source);
    });
  }
}

void Server::Impl::handle_utility(const HttpRequest& request, const std::shared_ptr<Reply>& reply) {
  auto body = parse_json_body(request.body);
  if (auto* e = std::get_if<ApiError>(&body))
    return reply->send(error_response(*e, "invalid_request"));
  const auto& json_body = std::get<nlohmann::ordered_json>(body);
  const std::string_view path = request.head.path();
  RouteAnswer answer = path == "/tokenize"     ? tokenize_route(json_body, tokenizer)
                       : path == "/detokenize" ? detokenize_route(json_body, tokenizer)
                                               : apply_template_route(json_body, tokenizer,
                                                                      options.chat_template);
  if (auto* e = std::get_if<ApiError>(&answer))
    return reply->send(error_response(*e, error_metric_type(*e)));
  reply->send(json_response(200, std::get<json>(answer)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  // The transport's threads end first (no connection then cancels into a gone loop); the loop's
  // last cancels may still wake connections, whose io_context lives until the transport goes.
  stop();
  if (impl_->http) impl_->http->wait();
  impl_->loop.reset();
  impl_->http.reset();
}

util::Result<std::unique_ptr<Server>> Server::create(engine::Engine& engine,
                                                     const tokenizer::Tokenizer& tokenizer,
                                                     ServerOptions options) {
  if (options.max_queue < 1)
    return util::errorf("--max-queue {}: must be at least 1", options.max_queue);
  if (options.port < 0 || options.port > 65535)
    return util::errorf("--port {}: must be 0 to 65535", options.port);
  if (options.max_body_bytes < 1024)
    return util::errorf("--max-body {}: must be at least 1024 bytes", options.max_body_bytes);
  if (options.request_timeout.count() <= 0 || options.idle_timeout.count() <= 0) {
    return util::errorf("--request-timeout and --idle-timeout must be positive");
  }
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
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

util::Status Server::bind() {
  const ServerOptions& o = impl_->options;
  HttpOptions http{.host = o.host,
                   .port = o.port,
                   .limits = {.max_body_bytes = o.max_body_bytes,
                              .request_timeout = o.request_timeout,
                              .idle_timeout = o.idle_timeout,
                              .max_connections = o.max_connections}};
  HR_ASSIGN_OR_RETURN(impl_->http, HttpServer::bind(http, impl_->routes()));
  return {};
}

int Server::port() const {
  return impl_->http ? impl_->http->port() : -1;
}

util::Status Server::run() {
  if (!impl_->http) return util::errorf("Server::run before a successful bind");
  impl_->http->run();
  return {};
}

void Server::drain(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  s.draining = true;
  if (s.http) s.http->stop_accepting();
  std::unique_lock lock(s.drain_mutex);
  if (!s.drained.wait_for(lock, timeout, [&] { return s.in_flight == 0; })) {
    util::log_info("drain: {} requests still running after {} ms (--drain-timeout): ending them",
                   s.in_flight.load(), timeout.count());
    s.loop->cancel_all();
    // Cut requests end at the next step; their last chunks then need a moment to be written.
    s.drained.wait_for(lock, s.options.request_timeout, [&] { return s.in_flight == 0; });
  }
  lock.unlock();
  stop();
}

void Server::stop() {
  if (impl_->http) impl_->http->stop();
}

telemetry::Registry& Server::metrics() {
  return impl_->registry;
}

}  // namespace server
