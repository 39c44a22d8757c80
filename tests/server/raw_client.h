// A raw TCP client for the hostile-client tests: sends exactly the bytes it is given (malformed,
// slow, pipelined, cut short) and parses what the server sends back, response by response.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace server_test {

struct RawResponse {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;  // de-chunked
  bool has_header(std::string_view line) const { return head.find(line) != std::string::npos; }
};

// The bytes of a POST /v1/completions request carrying `body`, `extra_headers` (each line ending
// in \r\n) before its Content-Length.
inline std::string completion_request(std::string_view body,
                                      const std::string& extra_headers = "") {
  return "POST /v1/completions HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         std::string(body);
}

// The response at the start of `bytes` if it is complete; `consumed` gets its length. A response
// with neither Content-Length nor chunked encoding is complete only when `closed`.
inline std::optional<RawResponse> parse_response(std::string_view bytes, size_t* consumed,
                                                 bool closed = false) {
  const size_t end = bytes.find("\r\n\r\n");
  if (end == std::string_view::npos || !bytes.starts_with("HTTP/1.")) return std::nullopt;
  RawResponse r;
  r.head = std::string(bytes.substr(0, end + 2));
  r.status = std::atoi(std::string(bytes.substr(9, 3)).c_str());
  std::string lower = r.head;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t at = end + 4;
  if (const size_t cl = lower.find("content-length:"); cl != std::string::npos) {
    const size_t n = std::strtoul(lower.c_str() + cl + 15, nullptr, 10);
    if (bytes.size() < at + n) return std::nullopt;
    r.body = std::string(bytes.substr(at, n));
    at += n;
  } else if (lower.find("transfer-encoding: chunked") != std::string::npos) {
    for (;;) {
      const size_t line_end = bytes.find("\r\n", at);
      if (line_end == std::string_view::npos) return std::nullopt;
      const size_t n =
          std::strtoul(std::string(bytes.substr(at, line_end - at)).c_str(), nullptr, 16);
      if (bytes.size() < line_end + 2 + n + 2) return std::nullopt;
      r.body += bytes.substr(line_end + 2, n);
      at = line_end + 2 + n + 2;
      if (n == 0) break;
    }
  } else {
    if (!closed) return std::nullopt;
    r.body = std::string(bytes.substr(at));
    at = bytes.size();
  }
  *consumed = at;
  return r;
}

// Every complete response in `bytes`, in order.
inline std::vector<RawResponse> parse_responses(std::string_view bytes, bool closed = true) {
  std::vector<RawResponse> out;
  size_t consumed = 0;
  while (auto r = parse_response(bytes, &consumed, closed)) {
    out.push_back(std::move(*r));
    bytes.remove_prefix(consumed);
  }
  return out;
}

class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) close();
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  RawClient(RawClient&& o) noexcept
      : fd_(std::exchange(o.fd_, -1)), received_(std::move(o.received_)) {}

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // False once the server has closed its side (the write fails).
  bool send(std::string_view bytes) {
    while (fd_ >= 0 && !bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return fd_ >= 0;
  }

  // Reads what arrives within `wait`; false once the server has closed the connection.
  bool receive(std::chrono::milliseconds wait) {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return true;
    char buffer[65536];
    const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    received_.append(buffer, static_cast<size_t>(n));
    return true;
  }

  // Everything the server sends until it closes the connection (or `limit`).
  const std::string& read_until_closed(std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!closed_ && std::chrono::steady_clock::now() < end)
      receive(std::chrono::milliseconds(100));
    return received_;
  }

  // The next whole response (within `limit`).
  std::optional<RawResponse> read_response(
      std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    for (;;) {
      size_t consumed = 0;
      if (auto r = parse_response(received_, &consumed, closed_)) {
        received_.erase(0, consumed);
        return r;
      }
      if (closed_ || std::chrono::steady_clock::now() >= end) return std::nullopt;
      receive(std::chrono::milliseconds(100));
    }
  }

  bool closed() const { return closed_; }
  const std::string& received() const { return received_; }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool closed_ = false;
  std::string received_;
};

}  // namespace server_test
