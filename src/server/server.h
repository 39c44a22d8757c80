// server::Server — the OpenAI-compatible HTTP API over one engine: /v1/chat/completions,
// /v1/completions (JSON or SSE), /v1/models, /health, /metrics, and llama-server's /tokenize,
// /detokenize and /apply-template. One engine thread owns the
// Scheduler; handlers hand it requests and connections take what it generates, so no lock is held
// across a forward pass and every request is answered exactly once.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "telemetry/metrics.h"
#include "tokenizer/tokenizer.h"
#include "util/result.h"

namespace server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                        // 0: any free port (see Server::port())
  std::string api_key;                    // empty: no authentication
  size_t max_body_bytes = 4u << 20;       // larger request bodies get 413
  int max_queue = 64;                     // requests waiting for a slot; more get 503
  std::string model_id;                   // the name /v1/models lists
  bool any_model = false;                 // answer requests naming another model (else 404)
  std::string chat_template;              // Jinja source used for /v1/chat/completions
  std::vector<std::string> cors_origins;  // browser origins allowed ("*": any); empty: no CORS
  // A request's head and body must arrive within this from its first byte (else 408), and each
  // response write must finish within it (else the connection closes).
  std::chrono::milliseconds request_timeout{30'000};
  std::chrono::milliseconds idle_timeout{30'000};  // keep-alive connections idle longer are closed
  int max_connections = 512;                       // more get 503 (probes still answered)
};

class Server {
 public:
  // Checks the options and the chat template; the engine and tokenizer must outlive the server.
  static util::Result<std::unique_ptr<Server>> create(engine::Engine& engine,
                                                      const tokenizer::Tokenizer& tokenizer,
                                                      ServerOptions options);
  ~Server();

  // Binds the address (an error names it when taken); after this, port() is the real port.
  util::Status bind();
  int port() const;
  // Serves until stop(), or until a drain has ended; call after bind().
  util::Status run();
  // Graceful stop: stops accepting connections, /health reports draining, new requests on open
  // connections get 503; running and queued requests finish, for up to `timeout`, after which
  // those still running are cut (streams end with finish_reason and [DONE]). Then stops; run()
  // returns. Blocks until then; call from any thread but run()'s.
  void drain(std::chrono::milliseconds timeout);
  // Stops now: closes every connection and cancels what runs. Safe from any thread.
  void stop();

  telemetry::Registry& metrics();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace server
