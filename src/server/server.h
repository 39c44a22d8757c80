// server::Server — the OpenAI-compatible HTTP API over one engine: /v1/chat/completions,
// /v1/completions (JSON or SSE), /v1/models, /health, /metrics. One engine thread owns the
// Scheduler; HTTP threads hand it requests and wait on per-request channels, so no lock is held
// across a forward pass and every request is answered exactly once.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "telemetry/metrics.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: any free port (see Server::port())
  std::string api_key;                // empty: no authentication
  size_t max_body_bytes = 4u << 20;   // larger request bodies get 413
  int max_queue = 64;                 // requests waiting for a slot; more get 503
  std::string model_id;               // the name /v1/models lists
  std::string chat_template;          // Jinja source used for /v1/chat/completions
  int http_threads = 0;               // 0: enough for every slot and queued request
};

class Server {
 public:
  // Checks the options and the chat template; the engine and tokenizer must outlive the server.
  static util::Result<std::unique_ptr<Server>> create(engine::Engine& engine, const tokenizer::Tokenizer& tokenizer,
                                                      ServerOptions options);
  ~Server();

  // Binds the address (an error names it when taken); after this, port() is the real port.
  util::Status bind();
  int port() const;
  // Serves until stop(); call after bind().
  util::Status run();
  // Stops accepting, ends open responses and returns run(). Safe from any thread or a signal
  // watcher thread.
  void stop();

  telemetry::Registry& metrics();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace server
