// The HTTP/1.1 transport on Boost.Beast's parser and asio: the accept loop with its connection
// cap, and each connection as a small state machine with one deadline timer.
//
// A connection is idle (waiting for a request's first byte, idle_timeout), reading a request
// (head and body against one request_timeout deadline), handling it (a read stays pending to
// notice a client that leaves and to keep what it pipelines; each write must finish within
// request_timeout), or closing (its last response sent, the rest of what the client sends read
// and dropped for a moment so that the response is not lost to a reset).
#include "server/http.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "util/log.h"

namespace server {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

namespace {

// How long a closing connection keeps reading (and dropping) what the client still sends.
constexpr auto kLingerTime = std::chrono::seconds(2);
// Bytes a client may send ahead (its next requests) while a response is produced.
constexpr size_t kPipelineLimit = 64u << 10;
// Descriptors beyond the connections: the model file, logs, the engine's own.
constexpr rlim_t kSpareDescriptors = 256;

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string status_line(int status) {
  const auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason.data(), reason.size()) +
         "\r\n";
}

std::string common_headers(const HttpResponse& r, bool keep_alive) {
  std::string out = status_line(r.status);
  out += "Content-Type: " + r.content_type + "\r\n";
  for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  return out;
}

// A whole response; a HEAD request gets its head only.
std::string serialize_whole(const HttpResponse& r, bool keep_alive, bool head_only) {
  std::string out = common_headers(r, keep_alive);
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n\r\n";
  if (!head_only) out += r.body;
  return out;
}

std::string chunk(std::string_view bytes) {
  if (bytes.empty()) return {};  // an empty chunk would end the body
  char size[24];
  const int n = std::snprintf(size, sizeof(size), "%zx\r\n", bytes.size());
  std::string out(size, static_cast<size_t>(n));
  out.append(bytes);
  out += "\r\n";
  return out;
}

// A route's answer, or a 500 if it throws: no exception may end an I/O or worker thread.
template <class Route>
std::optional<HttpResponse> guarded(const HttpRoutes& routes, Route&& route) {
  try {
    return route();
  } catch (const std::exception& e) {
    return routes.error(500, std::string("internal error: ") + e.what(), "internal");
  } catch (...) {
    return routes.error(500, "internal error", "internal");
  }
}

}  // namespace

std::string_view HttpRequestHead::path() const {
  const std::string_view t = target;
  return t.substr(0, t.find('?'));
}

std::string HttpRequestHead::header(std::string_view name) const {
  for (const auto& [n, value] : headers) {
    if (iequals(n, name)) return value;
  }
  return {};
}

class Connection;

struct HttpServer::Impl {
  Impl(HttpOptions o, HttpRoutes r)
      : options(std::move(o)),
        routes(std::move(r)),
        ioc(std::max(1, options.io_threads)),
        workers(static_cast<size_t>(std::max(1, options.workers))),
        acceptor(net::make_strand(ioc)),
        accept_retry(acceptor.get_executor()) {}

  void accept();
  void admit(tcp::socket socket);
  void refuse_unread(tcp::socket& socket);
  void each_connection(void (Connection::*action)());

  const HttpOptions options;
  const HttpRoutes routes;
  // Declared before the io_context: connections still queued in it at destruction unregister.
  std::mutex mutex;
  std::unordered_map<Connection*, std::weak_ptr<Connection>> connections;
  std::atomic<int> n_open{0};
  std::atomic<bool> draining{false};
  std::mutex run_mutex;
  std::condition_variable run_ended;
  bool running = false;
  net::io_context ioc;
  net::thread_pool workers;
  tcp::acceptor acceptor;
  net::steady_timer accept_retry;
  int port = -1;
};

class Connection : public Reply, public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl& server, tcp::socket socket, bool overflow)
      : server_(server),
        limits_(server.options.limits),
        socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        buffer_(std::max(limits_.max_header_bytes, kPipelineLimit) + (64u << 10)),
        overflow_(overflow) {}

  ~Connection() override {
    {
      std::lock_guard lock(server_.mutex);
      server_.connections.erase(this);
    }
    --server_.n_open;
  }

  void start() { next_request(); }
  tcp::socket::executor_type executor() { return socket_.get_executor(); }

  void send(HttpResponse response) override {
    net::post(socket_.get_executor(),
              [self = shared_from_this(), r = std::move(response)]() mutable {
                self->send_now(std::move(r));
              });
  }

  void follow(std::shared_ptr<ResponseSource> source) override {
    net::post(socket_.get_executor(),
              [self = shared_from_this(), source = std::move(source)]() mutable {
                if (self->phase_ != Phase::kHandling || self->source_ || self->responded_)
                  return source->abandon();
                self->source_ = std::move(source);
                self->pump();
              });
  }

  void wake() override {
    if (wake_posted_.exchange(true)) return;
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      self->wake_posted_ = false;
      self->pump();
    });
  }

  // Also from HttpServer::stop(), on the connection's own thread.
  void close() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;
    disarm();
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    // Dropping the source also breaks the cycle it may hold back to this connection (its wake).
    auto source = std::exchange(source_, nullptr);
    if (source && !source_done_) source->abandon();
  }

 private:
  enum class Phase { kIdle, kRequest, kHandling, kClosing, kClosed };

  // Idle: wait for the next request's first byte (unless it is already buffered).
  void next_request() {
    phase_ = Phase::kIdle;
    responded_ = false;
    source_done_ = false;
    keep_alive_ = false;
    if (buffer_.size() > 0) return read_head();
    arm(overflow_ ? limits_.probe_timeout : limits_.idle_timeout);
    read_some();
  }

  void read_head() {
    phase_ = Phase::kRequest;
    timed_out_ = false;
    arm(overflow_ ? limits_.probe_timeout : limits_.request_timeout);  // the whole head and body
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(limits_.max_header_bytes));
    parser_->body_limit(limits_.max_body_bytes);
    bhttp::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](error_code ec, size_t) { self->on_head(ec); });
  }

  void on_head(error_code ec) {
    if (phase_ != Phase::kRequest) return;
    if (ec) return read_failed(ec);
    const auto& message = parser_->get();
    head_ = HttpRequestHead{};
    head_.method = std::string(message.method_string());
    head_.target = std::string(message.target());
    for (const auto& field : message)
      head_.headers.emplace_back(field.name_string(), field.value());
    version_11_ = message.version() == 11;

    // Only chunked is a transfer coding we read; anything else (or chunked hidden among other
    // codings) could frame the body differently than a proxy in front of us did.
    const std::string te = head_.header("Transfer-Encoding");
    if (!te.empty() && (!iequals(trim(te), "chunked") || !version_11_)) {
      return respond_and_close(
          server_.routes.error(400,
                               "Transfer-Encoding '" + te +
                                   "' is not accepted: send the body with "
                                   "Content-Length or 'Transfer-Encoding: chunked' (HTTP/1.1)",
                               "bad_request"));
    }
    if (parser_->content_length() && *parser_->content_length() > limits_.max_body_bytes)
      return too_large();
    if (auto rejected = guarded(server_.routes, [&] { return server_.routes.screen(head_); })) {
      return respond_and_close(std::move(*rejected));
    }
    if (parser_->is_done()) return dispatch();
    if (iequals(trim(head_.header("Expect")), "100-continue")) {
      out_ = "HTTP/1.1 100 Continue\r\n\r\n";
      return net::async_write(socket_, net::buffer(out_),
                              [self = shared_from_this()](error_code e, size_t) {
                                if (self->phase_ != Phase::kRequest) return;
                                if (e) return self->close();
                                self->read_body();
                              });
    }
    read_body();
  }

  void read_body() {
    bhttp::async_read(socket_, buffer_, *parser_,
                      [self = shared_from_this()](error_code ec, size_t) {
                        if (self->phase_ != Phase::kRequest) return;
                        if (ec) return self->read_failed(ec);
                        self->dispatch();
                      });
  }

  void too_large() {
    respond_and_close(server_.routes.error(413,
                                           "the request body is larger than the " +
                                               std::to_string(limits_.max_body_bytes) +
                                               " byte limit (--max-body)",
                                           "too_large"));
  }

  // A request that could not be read whole: say why when the client can still hear it.
  void read_failed(error_code ec) {
    if (timed_out_) {
      return respond_and_close(
          server_.routes.error(408,
                               "the request did not arrive whole within " +
                                   std::to_string(limits_.request_timeout.count() / 1000.0) +
                                   " s (--request-timeout): send the head and body without pauses",
                               "request_timeout"));
    }
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        ec == net::error::eof || ec == net::error::connection_reset ||
        ec == net::error::operation_aborted || ec == net::error::broken_pipe) {
      return close();  // the client left
    }
    if (ec == bhttp::error::body_limit) return too_large();
    if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
      return respond_and_close(
          server_.routes.error(431,
                               "the request line and headers are larger than the " +
                                   std::to_string(limits_.max_header_bytes) + " byte limit",
                               "header_too_large"));
    }
    respond_and_close(
        server_.routes.error(400, "malformed HTTP request: " + ec.message(), "bad_request"));
  }

  // The whole request is in: a probe is answered here, anything else goes to the workers.
  void dispatch() {
    disarm();
    phase_ = Phase::kHandling;
    keep_alive_ = parser_->keep_alive();
    // head_ stays: the routes' headers for the response are read from it.
    HttpRequest request{head_, std::move(parser_->get().body())};
    parser_.reset();
    head_only_ = request.head.method == "HEAD";
    if (auto answer = guarded(server_.routes, [&] { return server_.routes.probe(request); })) {
      return send_now(std::move(*answer));
    }
    if (overflow_) {
      return respond_and_close(server_.routes.error(
          503, "the server has its maximum of open connections (--max-connections); retry shortly",
          "over_capacity"));
    }
    read_some();  // notices a client that goes away while the response is produced
    net::post(server_.workers, [self = shared_from_this(), request = std::move(request)]() mutable {
      const HttpRoutes& routes = self->server_.routes;
      auto failed = guarded(routes, [&]() -> std::optional<HttpResponse> {
        routes.handle(std::move(request), self);
        return std::nullopt;
      });
      if (failed) self->send(std::move(*failed));  // ignored if the handler had answered
    });
  }

  // One read of whatever arrives: the first byte of a request (idle), bytes sent ahead or the
  // end of the connection (handling), or bytes to drop (closing).
  void read_some() {
    reading_ = true;
    socket_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](error_code ec, size_t n) {
                              self->reading_ = false;
                              if (!ec) self->buffer_.commit(n);
                              self->on_read_some(ec);
                            });
  }

  void on_read_some(error_code ec) {
    switch (phase_) {
      case Phase::kIdle:
        if (ec) return close();
        return read_head();
      case Phase::kHandling:
        if (resume_after_read_) {
          resume_after_read_ = false;
          return ec && ec != net::error::operation_aborted ? close() : next_request();
        }
        if (ec) return close();  // the client went away: close() abandons the response
        if (buffer_.size() < kPipelineLimit) read_some();
        return;
      case Phase::kClosing:
        if (ec) return close();
        buffer_.consume(buffer_.size());
        return read_some();
      case Phase::kRequest:
      case Phase::kClosed:
        return;
    }
  }

  // The routes' headers for this request (CORS), on its response.
  void add_route_headers(HttpResponse& response) {
    if (!server_.routes.headers) return;
    for (auto& header : server_.routes.headers(head_)) response.headers.push_back(std::move(header));
  }

  void send_now(HttpResponse response) {
    if (phase_ != Phase::kHandling || responded_) return;
    add_route_headers(response);
    responded_ = true;
    source_done_ = true;
    keep_alive_ = keep_alive_ && !server_.draining;
    write(serialize_whole(response, keep_alive_, head_only_), true);
  }

  // Takes what the source has ready and writes it, one write at a time.
  void pump() {
    if (phase_ != Phase::kHandling || !source_ || writing_ || source_done_) return;
    ResponseSource::Part part;
    try {
      part = source_->pull();
    } catch (const std::exception& e) {
      util::log_error("http: a response failed while it was sent: {}", e.what());
      return close();
    }
    if (part.start) add_route_headers(*part.start);
    std::string bytes;
    bool last = part.last;
    if (part.start && responded_) {
      last = true;  // a second start is a handler's bug: end what was begun
    } else if (part.start && !part.start->chunked) {
      responded_ = true;
      keep_alive_ = keep_alive_ && !server_.draining;
      bytes = serialize_whole(*part.start, keep_alive_, head_only_);
      last = true;
    } else if (part.start) {
      responded_ = true;
      stream_open_ = true;
      // HTTP/1.0 has no chunked encoding: the body then ends when the connection does.
      chunked_ = version_11_;
      keep_alive_ = keep_alive_ && chunked_ && !server_.draining;
      bytes = common_headers(*part.start, keep_alive_);
      bytes += chunked_ ? "Transfer-Encoding: chunked\r\n\r\n" : "\r\n";
      bytes += chunked_ ? chunk(part.start->body) : part.start->body;
    }
    if (stream_open_ && !part.more.empty()) bytes += chunked_ ? chunk(part.more) : part.more;
    if (last && stream_open_ && chunked_) bytes += "0\r\n\r\n";
    if (last) source_done_ = true;
    if (!bytes.empty()) return write(std::move(bytes), last);
    if (last) close();  // a source that ended without a response
  }

  void write(std::string bytes, bool last) {
    writing_ = true;
    out_ = std::move(bytes);
    arm(limits_.request_timeout);
    net::async_write(socket_, net::buffer(out_),
                     [self = shared_from_this(), last](error_code ec, size_t) {
                       self->writing_ = false;
                       self->disarm();
                       if (self->phase_ != Phase::kHandling) return;
                       if (ec) return self->close();
                       if (last) return self->finish_response();
                       self->pump();
                     });
  }

  void finish_response() {
    source_.reset();
    stream_open_ = false;
    chunked_ = false;
    head_only_ = false;
    if (!keep_alive_) return linger();
    if (!reading_) return next_request();
    resume_after_read_ = true;  // the pending read ends, then the next request is read
    error_code ignored;
    socket_.cancel(ignored);
  }

  void respond_and_close(HttpResponse response) {
    parser_.reset();
    phase_ = Phase::kHandling;
    responded_ = false;
    keep_alive_ = false;
    send_now(std::move(response));
  }

  // After the last response: stop sending, read and drop what the client still sends for a
  // moment, so that closing with unread bytes does not reset the connection before it has read
  // the response.
  void linger() {
    phase_ = Phase::kClosing;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    arm(kLingerTime);
    if (!reading_) read_some();
  }

  void arm(std::chrono::milliseconds after) {
    const uint64_t generation = ++timer_generation_;
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
      if (ec || generation != self->timer_generation_) return;
      self->on_deadline();
    });
  }
  void disarm() {
    ++timer_generation_;
    timer_.cancel();
  }

  void on_deadline() {
    if (phase_ == Phase::kRequest) {
      timed_out_ = true;  // the pending read ends, then read_failed answers 408
      error_code ignored;
      socket_.cancel(ignored);
      return;
    }
    close();  // idle too long, a write that made no progress, or lingering done
  }

  HttpServer::Impl& server_;
  const HttpLimits& limits_;
  tcp::socket socket_;  // its executor is this connection's strand
  net::steady_timer timer_;
  uint64_t timer_generation_ = 0;
  boost::beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  HttpRequestHead head_;
  const bool overflow_;  // beyond max_connections: probes only
  Phase phase_ = Phase::kIdle;
  bool version_11_ = true;
  bool keep_alive_ = false;
  bool head_only_ = false;
  bool timed_out_ = false;
  bool reading_ = false;
  bool resume_after_read_ = false;
  bool writing_ = false;
  bool responded_ = false;    // the response (or its head) is written or being written
  bool stream_open_ = false;  // a chunked (or HTTP/1.0 streamed) response's head is sent
  bool chunked_ = false;
  std::shared_ptr<ResponseSource> source_;
  bool source_done_ = false;  // its last part is taken
  std::string out_;           // the bytes being written
  std::atomic<bool> wake_posted_{false};
};

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors or buffers: wait rather than spin; connections that end free some.
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](error_code e) {
        if (!e) accept();
      });
      return;
    }
    admit(std::move(socket));
    accept();
  });
}

void HttpServer::Impl::admit(tcp::socket socket) {
  const HttpLimits& limits = options.limits;
  const int n = ++n_open;
  if (n > limits.max_connections + limits.probe_connections) {
    refuse_unread(socket);
    --n_open;
    return;
  }
  auto connection =
      std::make_shared<Connection>(*this, std::move(socket), n > limits.max_connections);
  {
    std::lock_guard lock(mutex);
    connections.emplace(connection.get(), connection);
  }
  net::post(connection->executor(), [connection] { connection->start(); });
}

// Past every cap: a 503 written without reading the request (it fits in a fresh socket's send
// buffer), then the connection closed.
void HttpServer::Impl::refuse_unread(tcp::socket& socket) {
  const HttpResponse r = routes.error(
      503, "the server has its maximum of open connections (--max-connections); retry shortly",
      "over_capacity");
  const std::string bytes = serialize_whole(r, false, false);
  (void)::send(socket.native_handle(), bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

void HttpServer::Impl::each_connection(void (Connection::*action)()) {
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard lock(mutex);
    for (auto& [_, weak] : connections) {
      if (auto c = weak.lock()) open.push_back(std::move(c));
    }
  }
  for (auto& c : open) net::post(c->executor(), [c, action] { (c.get()->*action)(); });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  stop();
  impl_->workers.join();
}

util::Result<std::unique_ptr<HttpServer>> HttpServer::bind(const HttpOptions& options,
                                                           HttpRoutes routes) {
  const HttpLimits& limits = options.limits;
  if (limits.max_connections < 1)
    return util::errorf("--max-connections {}: must be at least 1", limits.max_connections);
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  const rlim_t needed =
      static_cast<rlim_t>(limits.max_connections + limits.probe_connections) + kSpareDescriptors;
  if (files.rlim_cur < needed) {
    files.rlim_cur = std::min(needed, files.rlim_max);
    setrlimit(RLIMIT_NOFILE, &files);
    getrlimit(RLIMIT_NOFILE, &files);
  }
  if (files.rlim_cur < needed) {
    return util::errorf(
        "--max-connections {} needs {} open files but this process may open {} (ulimit -n): raise "
        "the limit or lower --max-connections",
        limits.max_connections, needed, files.rlim_cur);
  }

  auto impl = std::make_unique<Impl>(options, std::move(routes));
  error_code ec;
  const auto address = net::ip::make_address(options.host, ec);
  if (ec) return util::errorf("--host {}: not an IP address ({})", options.host, ec.message());
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  tcp::acceptor& acceptor = impl->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return util::errorf(
        "cannot listen on {}:{} ({}) — the port is taken or the address is not this machine's; "
        "pick another with --host/--port",
        options.host, options.port, ec.message());
  }
  impl->port = acceptor.local_endpoint().port();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const {
  return impl_->port;
}

void HttpServer::run() {
  net::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
    if (!impl->draining) impl->accept();
  });
  std::vector<std::thread> threads;
  for (int i = 1; i < impl_->options.io_threads; ++i)
    threads.emplace_back([this] { impl_->ioc.run(); });
  {
    std::lock_guard lock(impl_->run_mutex);
    impl_->running = true;
  }
  impl_->ioc.run();
  for (auto& t : threads) t.join();
  {
    std::lock_guard lock(impl_->run_mutex);
    impl_->running = false;
  }
  impl_->run_ended.notify_all();
}

void HttpServer::wait() {
  std::unique_lock lock(impl_->run_mutex);
  impl_->run_ended.wait(lock, [&] { return !impl_->running; });
}

void HttpServer::stop_accepting() {
  impl_->draining = true;
  net::post(impl_->acceptor.get_executor(), [impl = impl_.get()] {
    error_code ignored;
    impl->acceptor.close(ignored);
    impl->accept_retry.cancel();
  });
}

void HttpServer::stop() {
  stop_accepting();
  impl_->each_connection(&Connection::close);
}

int HttpServer::open_connections() const {
  return impl_->n_open.load();
}

}  // namespace server
