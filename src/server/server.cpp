// The HTTP layer (cpp-httplib): routes, auth, errors in the OpenAI shape, and completions
// answered as the engine generates them.
#include "server/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include "chat/template.h"
#include "server/api.h"
#include "server/engine_loop.h"
#include "server/json_body.h"
#include "server/metrics.h"
#include "server/request_builder.h"
#include "server/stream.h"
#include "telemetry/gpu_metrics.h"
#include "telemetry/nvml.h"
#include "util/log.h"

namespace server {

using nlohmann::json;

struct Server::Impl {
  Impl(engine::Engine& e, const tokenizer::Tokenizer& t, ServerOptions o)
      : engine(e),
        tokenizer(t),
        options(std::move(o)),
        metrics(registry, kv_device_name(e.plan())) {}

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
  // Sends what the engine generates for request `id` as it comes; cancels it if the client goes.
  void stream_response(httplib::Response& res, std::shared_ptr<TokenChannel> channel,
                       std::shared_ptr<ResponseWriter> writer, int id, bool stream);
  void install_routes();

  engine::Engine& engine;
  const tokenizer::Tokenizer& tokenizer;
  ServerOptions options;
  telemetry::Registry registry;
  ServerMetrics metrics;
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

void Server::Impl::handle_completion(const httplib::Request& req, httplib::Response& res,
                                     bool chat) {
  auto body = parse_json_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return send_error(res, *e, "invalid_request");
  const auto& ordered = std::get<nlohmann::ordered_json>(body);
  auto parsed = parse_request(json(ordered), chat, engine.spec().n_vocab);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e, "invalid_request");
  const CompletionRequest& r = std::get<CompletionRequest>(parsed);

  auto channel = std::make_shared<TokenChannel>(tokenizer, r.stop, r.logprobs, metrics);
  auto built = build_engine_request(r, ordered, {tokenizer, options.chat_template}, channel);
  if (auto* e = std::get_if<ApiError>(&built)) return send_error(res, *e, error_metric_type(*e));
  const engine::SubmitResult submitted = loop->submit(std::get<engine::Request>(std::move(built)));
  if (submitted.refusal != engine::Refusal::kNone) {
    const ApiError e = refusal_error(submitted, chat);
    if (e.status == 503) res.set_header("Retry-After", "1");
    return send_error(res, e, error_metric_type(e));
  }
  auto writer = std::make_shared<ResponseWriter>(
      ResponseHeader{.id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id++),
                     .created = static_cast<int64_t>(std::time(nullptr)),
                     .model = options.model_id,
                     .chat = chat},
      r.stream, r.include_usage, r.logprobs);
  stream_response(res, channel, writer, submitted.id, r.stream);
}

void Server::Impl::stream_response(httplib::Response& res, std::shared_ptr<TokenChannel> channel,
                                   std::shared_ptr<ResponseWriter> writer, int id, bool stream) {
  // The response is chunked either way: writing to the socket (or checking it while waiting) is
  // how a vanished client is noticed, and the releaser cancels whatever has not finished.
  auto provider = [channel, writer, this](size_t, httplib::DataSink& sink) -> bool {
    const Taken taken = channel->take(std::chrono::milliseconds(50));
    if (stopping) return false;
    const std::string out = writer->write(taken);
    if (out.empty() && !taken.done) return sink.is_writable();
    if (!out.empty() && !sink.write(out.data(), out.size())) return false;
    if (taken.done) sink.done();
    return true;
  };
  auto releaser = [channel, id, this](bool) {
    if (!channel->done()) {
      metrics.error("client_disconnected").inc();
      loop->cancel(id);
    }
  };
  if (stream) res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(writer->content_type(), provider, releaser);
}

void Server::Impl::install_routes() {
  http.set_payload_max_length(options.max_body_bytes);
  const int threads = options.http_threads > 0
                          ? options.http_threads
                          : std::clamp(2 * (engine.n_slots() + options.max_queue), 16, 512);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };

  // /v1 requires the key when one is set; /health and /metrics stay open for probes.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options.api_key.empty() || !req.path.starts_with("/v1"))
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + options.api_key) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    send_error(
        res,
        ApiError{.status = 401,
                 .message = "missing or wrong API key: send the header 'Authorization: Bearer KEY'",
                 .code = "invalid_api_key"},
        "unauthorized");
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib answers itself (413, 404, 400 on a bad request line) get the OpenAI shape too.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        ApiError e{.status = res.status};
        std::string type = "http_" + std::to_string(res.status);
        if (res.status == 413) {
          e.message = fmt::format("the request body is larger than the {} byte limit (--max-body)",
                                  options.max_body_bytes);
          type = "too_large";
        } else if (res.status == 404) {
          e.message = fmt::format(
              "no route {} {}: see /v1/models, /v1/chat/completions, /v1/completions, /health, "
              "/metrics",
              req.method, req.path);
          type = "not_found";
        } else {
          e.message = fmt::format("HTTP {}", res.status);
        }
        send_error(res, e, type);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([this](const httplib::Request&, httplib::Response& res,
                                    std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(
        res, ApiError{.status = 500, .message = "internal error: " + what, .type = "server_error"},
        "internal");
  });

  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, true);
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, false);
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json model = {{"id", options.model_id},
                        {"object", "model"},
                        {"created", created},
                        {"owned_by", "headroom"}};
    res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(),
                    "application/json");
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

util::Result<std::unique_ptr<Server>> Server::create(engine::Engine& engine,
                                                     const tokenizer::Tokenizer& tokenizer,
                                                     ServerOptions options) {
  if (options.max_queue < 1)
    return util::errorf("--max-queue {}: must be at least 1", options.max_queue);
  if (options.port < 0 || options.port > 65535)
    return util::errorf("--port {}: must be 0 to 65535", options.port);
  if (options.max_body_bytes < 1024)
    return util::errorf("--max-body {}: must be at least 1024 bytes", options.max_body_bytes);
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
  if (impl_->bound_port >= 0 && impl_->listen_socket >= 0 &&
      ::listen(impl_->listen_socket, SOMAXCONN) != 0) {
    return util::errorf("cannot widen the listen backlog of port {}: {}", impl_->bound_port,
                        std::strerror(errno));
  }
  if (impl_->bound_port < 0) {
    return util::errorf(
        "cannot listen on {}:{} — the port is taken or the address is not this machine's; pick "
        "another with --host/--port",
        o.host, o.port);
  }
  return {};
}

int Server::port() const {
  return impl_->bound_port;
}

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

telemetry::Registry& Server::metrics() {
  return impl_->registry;
}

}  // namespace server
