// headroom serve: plans, loads, then serves the OpenAI-compatible HTTP API until SIGINT/SIGTERM.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "commands.h"
#include "generation.h"
#include "server/server.h"
#include "util/units.h"

namespace cli {

void add_serve(CLI::App& app, int& exit_code) {
  struct Options {
    PlanFlags plan;
    server::ServerOptions server;
    std::string chat_template;
    std::string max_body = "4M";
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve an OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions, /metrics)");
  add_plan_flags(cmd, o->plan, /*with_shape=*/false, /*default_slots=*/4);
  cmd->add_option("--host", o->server.host, "Address to listen on (another than 127.0.0.1 exposes the server)")
      ->capture_default_str();
  cmd->add_option("--port", o->server.port, "TCP port (0 = any free port, printed)")->capture_default_str();
  cmd->add_option("--api-key", o->server.api_key, "Require 'Authorization: Bearer KEY' on every /v1 route");
  cmd->add_option("--max-queue", o->server.max_queue,
                  "Requests that may wait for a slot; beyond it requests get 503 with Retry-After")
      ->capture_default_str();
  cmd->add_option("--max-body", o->max_body, "Largest request body, e.g. 4M; larger ones get 413")
      ->capture_default_str();
  cmd->add_option("--chat-template", o->chat_template,
                  "Template for chat completions: a built-in name (gemma4, chatml, llama3) or a file "
                  "(default: the model's, else chatml)");
  cmd->callback([o, &exit_code] {
    auto fail = [&](const std::string& message, int code) {
      std::fprintf(stderr, "%s\n", message.c_str());
      exit_code = code;
    };
    auto max_body = util::parse_bytes(o->max_body);
    if (!max_body) return fail("--max-body: " + max_body.error().message(), kExitBadInput);
    o->server.max_body_bytes = *max_body;
    // Signals go to one watcher thread; every thread started from here on inherits the mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    auto session = open_session(o->plan);
    if (!session) return fail(session.error().message(), kExitBadInput);
    auto source = choose_chat_template(o->chat_template, *session->planned.file, session->planned.spec, "chatml");
    if (!source) return fail(source.error().message(), kExitBadInput);
    o->server.chat_template = *source;
    o->server.model_id = std::filesystem::path(session->planned.source).stem().string();
    auto srv = server::Server::create(*session->engine, *session->tokenizer, o->server);
    if (!srv) return fail(srv.error().message(), kExitBadInput);
    if (auto bound = (*srv)->bind(); !bound) return fail(bound.error().message(), kExitBadInput);
    std::fprintf(stderr, "serving %s on http://%s:%d (%d slots, %s, queue %d)%s — Ctrl-C stops\n",
                 o->server.model_id.c_str(), o->server.host.c_str(), (*srv)->port(),
                 session->engine->n_slots(), kernels_description(session->planned.plan).c_str(),
                 o->server.max_queue, o->server.api_key.empty() ? "" : ", API key required");
    server::Server* s = srv->get();
    std::thread watcher([s, signals] {
      int signal = 0;
      sigwait(&signals, &signal);
      std::fprintf(stderr, "%s: stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
      s->stop();
    });
    auto ran = s->run();
    // If the server stopped on its own, wake the watcher so it can be joined.
    pthread_kill(watcher.native_handle(), SIGTERM);
    watcher.join();
    if (!ran) return fail(ran.error().message(), kExitFailure);
    exit_code = kExitOk;
  });
}

}  // namespace cli
