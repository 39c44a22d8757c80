// server::HttpServer — the HTTP/1.1 transport, built to face hostile clients: Boost.Beast's
// parser over asio, with a deadline for each request's whole head and body, idle keep-alive
// connections closed, a cap on connections answered with a fast 503 while /health and /metrics
// still get through, early rejections that close the connection (an unread body is never taken
// for the next request), and response writes that must make progress. Handlers run off the I/O
// threads, so a slow one never delays a probe. Nothing here knows the OpenAI API.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/result.h"

namespace server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpLimits {
  size_t max_header_bytes = 16u << 10;  // request line and headers; more gets 431
  size_t max_body_bytes = 4u << 20;     // more gets 413
  // From a request's first byte to its last (head and body); then 408. Each write of a response
  // must also finish within it, or the connection is closed (a client that stopped reading).
  std::chrono::milliseconds request_timeout{30'000};
  std::chrono::milliseconds idle_timeout{30'000};  // a connection waiting for its next request
  int max_connections = 512;                       // open connections served in full
  // Beyond max_connections, this many more are read with probe_timeout: /health and /metrics
  // are answered, anything else gets 503 at once. Beyond those, a connection gets 503 unread.
  int probe_connections = 32;
  std::chrono::milliseconds probe_timeout{2'000};
};

struct HttpRequestHead {
  std::string method;
  std::string target;  // as sent: path and query
  HttpHeaders headers;
  std::string_view path() const;                    // the target without its query
  std::string header(std::string_view name) const;  // case-insensitive; empty when absent
};

struct HttpRequest {
  HttpRequestHead head;
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HttpHeaders headers;  // more headers, e.g. Retry-After
  std::string body;
  // Only from a ResponseSource: the body is sent with chunked encoding, `body` being its first
  // bytes and the source's later parts the rest.
  bool chunked = false;
};

// A response produced over time on another thread (the engine's). The connection pulls on its
// own thread each time it is woken (Reply::wake) and after each write, until the last part.
class ResponseSource {
 public:
  struct Part {
    std::optional<HttpResponse>
        start;          // with the first part: a whole response, or a chunked one's head
    std::string more;   // a chunked body's next bytes
    bool last = false;  // the response is complete (always so with a whole start)
  };
  virtual ~ResponseSource() = default;
  virtual Part pull() = 0;
  // The connection ended before the last part was written (the client went away, a write made no
  // progress, the server stopped). Called at most once, on the connection's thread.
  virtual void abandon() = 0;
};

// A handler's way back to its connection. Thread-safe; calls after the connection ended do
// nothing (a source given then is abandoned at once).
class Reply {
 public:
  virtual ~Reply() = default;
  virtual void send(HttpResponse response) = 0;
  virtual void follow(std::shared_ptr<ResponseSource> source) = 0;
  virtual void wake() = 0;  // the followed source has more
};

struct HttpRoutes {
  // Checked once the head has arrived, before the body is read. A response here (401, 503 while
  // draining …) is sent with Connection: close and the connection closed after it.
  std::function<std::optional<HttpResponse>(const HttpRequestHead&)> screen;
  // Answered on the connection's own thread, also for connections beyond max_connections:
  // /health and /metrics. Null for any other request.
  std::function<std::optional<HttpResponse>(const HttpRequest&)> probe;
  // Every other request, on the worker threads.
  std::function<void(HttpRequest, std::shared_ptr<Reply>)> handle;
  // Headers every response to this request carries (CORS); null for none.
  std::function<HttpHeaders(const HttpRequestHead&)> headers;
  // The response for an error the transport finds itself (400, 408, 413, 431, 503); `type` names
  // it for the error counters (bad_request, request_timeout, too_large, header_too_large,
  // over_capacity, draining).
  std::function<HttpResponse(int status, const std::string& message, const std::string& type)>
      error;
};

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  HttpLimits limits;
  int io_threads = 2;  // connections' reads and writes, probes
  int workers = 2;     // HttpRoutes::handle
};

class HttpServer {
 public:
  // Binds and listens now (an error names a taken port); raises the open-file limit as far as the
  // connection cap needs, or says why it cannot.
  static util::Result<std::unique_ptr<HttpServer>> bind(const HttpOptions& options,
                                                        HttpRoutes routes);
  ~HttpServer();  // stop(), then waits for the threads

  int port() const;
  // Serves on this thread and io_threads − 1 more until stop(), or until every connection has
  // ended after stop_accepting().
  void run();
  // Draining: closes the listener. Open connections stay until their idle timeout or stop(), so
  // a balancer holding one still hears the routes' answers (a draining /health); every response
  // from now on carries Connection: close and ends its connection.
  void stop_accepting();
  // Closes every connection now (their sources are abandoned) and ends run().
  void stop();
  // Returns once run() has returned (at once if it is not running).
  void wait();
  int open_connections() const;

 private:
  struct Impl;
  friend class Connection;  // http.cpp's, one per connection
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace server
