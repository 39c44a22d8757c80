// headroom serve: plans, loads, then serves the OpenAI-compatible HTTP API until SIGINT/SIGTERM.
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "commands.h"
#include "generation.h"
#include "server/server.h"
#include "util/units.h"

namespace cli {

namespace {

std::chrono::milliseconds to_millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

// ", images up to 280 tokens, audio up to 30 s" — what requests may carry; empty without media.
std::string media_description(const plan::Plan& plan) {
  std::string out;
  if (plan.request.image_tokens > 0)
    out += fmt::format(", images up to {} tokens", plan.request.image_tokens);
  if (plan.request.audio_seconds > 0)
    out += fmt::format(", audio up to {:g} s", plan.request.audio_seconds);
  return out;
}

}  // namespace

void add_serve(CLI::App& app, int& exit_code) {
  struct Options {
    PlanFlags plan;
    server::ServerOptions server;
    std::string chat_template;
    std::string max_body = "4M";
    double request_timeout = 30, idle_timeout = 30, drain_timeout = 30;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve an OpenAI-compatible HTTP API (/v1/chat/completions with tools and thinking, "
      "/v1/completions, LoRA adapters chosen per request, /tokenize, /detokenize, "
      "/apply-template, /metrics)");
  add_plan_flags(cmd, o->plan, /*with_shape=*/false, /*default_slots=*/4, /*lora_slots=*/true);
  cmd->add_option("--host", o->server.host,
                  "Address to listen on (another than 127.0.0.1 exposes the server)")
      ->capture_default_str();
  cmd->add_option("--port", o->server.port, "TCP port (0 = any free port, printed)")
      ->capture_default_str();
  cmd->add_option("--api-key", o->server.api_key,
                  "Require 'Authorization: Bearer KEY' on every /v1 route and on /tokenize, /detokenize, "
                  "/apply-template");
  cmd->add_option("--max-queue", o->server.max_queue,
                  "Requests that may wait for a slot; beyond it requests get 503 with Retry-After")
      ->capture_default_str();
  cmd->add_option("--max-body", o->max_body,
                  "Largest request body, e.g. 4M (32M with --mmproj: images and audio come "
                  "inline, base64); larger ones get 413")
      ->capture_default_str();
  cmd->add_option("--request-timeout", o->request_timeout,
                  "Seconds a request's head and body may take to arrive (else 408), and each "
                  "response write to "
                  "finish (else the connection closes)")
      ->capture_default_str();
  cmd->add_option("--idle-timeout", o->idle_timeout,
                  "Seconds a keep-alive connection may wait for its next request")
      ->capture_default_str();
  cmd->add_option("--max-connections", o->server.max_connections,
                  "Open connections served; beyond it /health and /metrics are still answered, the "
                  "rest get 503")
      ->capture_default_str();
  cmd->add_option("--drain-timeout", o->drain_timeout,
                  "On SIGTERM/SIGINT: seconds running requests may take to finish before they are "
                  "cut (a second "
                  "signal stops at once)")
      ->capture_default_str();
  cmd->add_option("--cors-origin", o->server.cors_origins,
                  "Let web pages from this origin call the API (repeatable; '*' for any); off by default");
  cmd->add_flag("--any-model", o->server.any_model,
                "Answer requests whatever model they name (default: 404 model_not_found unless they name this "
                "one or none)");
  cmd->add_option(
      "--chat-template", o->chat_template,
      "Template for chat completions: a built-in name (gemma4, chatml, llama3) or a file "
      "(default: the model's, else chatml)");
  cmd->callback([o, cmd, &exit_code] {
    auto fail = [&](const std::string& message, int code) {
      std::fprintf(stderr, "%s\n", message.c_str());
      exit_code = code;
    };
    if (!o->plan.mmproj.empty() && cmd->count("--max-body") == 0) o->max_body = "32M";
    auto max_body = util::parse_bytes(o->max_body);
    if (!max_body) return fail("--max-body: " + max_body.error().message(), kExitBadInput);
    o->server.max_body_bytes = *max_body;
    for (const auto& [flag, seconds] : {std::pair{"--request-timeout", o->request_timeout},
                                        {"--idle-timeout", o->idle_timeout},
                                        {"--drain-timeout", o->drain_timeout}}) {
      if (!(seconds > 0 && seconds <= 86400))
        return fail(std::string(flag) + ": must be between 0 and 86400 seconds", kExitBadInput);
    }
    o->server.request_timeout = to_millis(o->request_timeout);
    o->server.idle_timeout = to_millis(o->idle_timeout);
    // Signals go to one watcher thread; every thread started from here on inherits the mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    auto session = open_session(o->plan, /*serving=*/true);
    if (!session) return fail(session.error().message(), kExitBadInput);
    auto source = choose_chat_template(o->chat_template, *session->planned.file,
                                       session->planned.spec, "chatml");
    if (!source) return fail(source.error().message(), kExitBadInput);
    o->server.chat_template = *source;
    o->server.model_id = std::filesystem::path(session->planned.source).stem().string();
    if (session->engine->adapters().find(o->server.model_id)) {
      return fail("--lora: an adapter would be named '" + o->server.model_id +
                      "' like the model — rename its file",
                  kExitBadInput);
    }
    auto srv = server::Server::create(*session->engine, *session->tokenizer, o->server);
    if (!srv) return fail(srv.error().message(), kExitBadInput);
    if (auto bound = (*srv)->bind(); !bound) return fail(bound.error().message(), kExitBadInput);
    std::fprintf(stderr,
                 "serving %s on http://%s:%d (%d slots, %s, queue %d%s)%s — Ctrl-C drains\n",
                 o->server.model_id.c_str(), o->server.host.c_str(), (*srv)->port(),
                 session->engine->n_slots(), kernels_description(session->planned.plan).c_str(),
                 o->server.max_queue, media_description(session->planned.plan).c_str(),
                 o->server.api_key.empty() ? "" : ", API key required");
    server::Server* s = srv->get();
    // The first signal drains (runs on its own thread so a second signal can stop at once).
    std::atomic<bool> ended{false};
    const auto drain_timeout = to_millis(o->drain_timeout);
    std::thread watcher([s, signals, &ended, drain_timeout] {
      int signal = 0;
      sigwait(&signals, &signal);
      if (ended) return;
      std::fprintf(
          stderr,
          "%s: draining — no new connections, running requests get up to %.0f s (--drain-timeout); "
          "a second signal stops at once\n",
          signal == SIGINT ? "SIGINT" : "SIGTERM", drain_timeout.count() / 1000.0);
      std::thread drainer([s, drain_timeout] { s->drain(drain_timeout); });
      sigwait(&signals, &signal);
      s->stop();
      drainer.join();
    });
    auto ran = s->run();
    // The server has stopped (drained, or on its own): wake the watcher so it can be joined.
    ended = true;
    pthread_kill(watcher.native_handle(), SIGTERM);
    watcher.join();
    if (!ran) return fail(ran.error().message(), kExitFailure);
    exit_code = kExitOk;
  });
}

}  // namespace cli
