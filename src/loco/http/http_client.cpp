#include "loco/http/http_client.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include "loco/http/http_request.h"
#include "loco/util/host_port.h"
#include "loco/util/tcp_connect.h"

namespace loco::http {

namespace {

using Clock = std::chrono::steady_clock;

// A socket closed however the exchange ends.
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// Milliseconds left until `deadline`, rounded up (a wait that ends ends past it), at least 0.
int millis_left(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(std::min<long long>(left, 1 << 30)) : 0;
}

// Waits until `fd` is ready for `events` or the deadline passes (false then).
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd ready{fd, events, 0};
    const int found = ::poll(&ready, 1, millis_left(deadline));
    if (found > 0) return true;
    if (found == 0 || errno != EINTR) return false;
  }
}

bool send_all(int fd, std::string_view bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    if (!wait_for(fd, POLLOUT, deadline)) return false;
    const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (sent <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(sent));
  }
  return true;
}

// Up to `capacity` more bytes onto `into`: how many (0 at the connection's end), or -1 at the deadline or an error.
long receive_some(int fd, std::string& into, std::size_t capacity, Clock::time_point deadline) {
  for (;;) {
    if (!wait_for(fd, POLLIN, deadline)) return -1;
    const std::size_t before = into.size();
    into.resize(before + capacity);
    const ssize_t got = ::recv(fd, into.data() + before, capacity, 0);
    into.resize(before + static_cast<std::size_t>(std::max<ssize_t>(got, 0)));
    if (got >= 0) return static_cast<long>(got);
    if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
  }
}

std::string request_text(const HttpExchange& r) {
  std::string text =
      fmt::format("{} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", r.method, r.path, host_port(r.host, r.port));
  for (const auto& [name, value] : r.headers) text += fmt::format("{}: {}\r\n", name, value);
  if (r.method == "POST") {
    text += fmt::format("Content-Type: application/json\r\nContent-Length: {}\r\n", r.body.size());
  }
  return text + "\r\n" + (r.method == "POST" ? r.body : std::string());
}

}  // namespace

std::optional<HttpReply> parse_response_head(std::string_view head, std::string& why_not) {
  HttpReply response;
  bool first = true;
  while (!head.empty()) {
    const auto end = head.find('\n');
    std::string_view line = head.substr(0, end);
    head.remove_prefix(end == std::string_view::npos ? head.size() : end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (first) {  // HTTP/1.x SSS REASON: the reason is not read
      first = false;
      const std::string_view version = line.substr(0, 9), code = line.substr(std::min<std::size_t>(9, line.size()), 3);
      int status = 0;
      const auto [stop, error] = std::from_chars(code.data(), code.data() + code.size(), status);
      if (line.size() < 12 || (version != "HTTP/1.1 " && version != "HTTP/1.0 ") || error != std::errc() ||
          stop != code.data() + 3 || status < 100 || (line.size() > 12 && line[12] != ' ')) {
        why_not = "its answer is not HTTP/1.x (its status line does not read HTTP/1.1 NNN)";
        return std::nullopt;
      }
      response.status = status;
      continue;
    }
    const auto colon = line.find(':');
    const std::string_view name = colon == std::string_view::npos ? std::string_view() : line.substr(0, colon);
    const std::string_view value =
        colon == std::string_view::npos ? std::string_view() : trimmed(line.substr(colon + 1));
    if (name.empty() || !std::all_of(name.begin(), name.end(), token_char) || !plain_text(value)) {
      why_not = "its answer holds a header line that is not NAME: VALUE";
      return std::nullopt;
    }
    if (response.headers.size() >= kMaxHeaders) {
      why_not = fmt::format("its answer has more than {} headers", kMaxHeaders);
      return std::nullopt;
    }
    if (!response.headers.emplace(lower(name), value).second) {
      why_not = fmt::format("its answer names the header {} twice", name);
      return std::nullopt;
    }
  }
  if (first) {
    why_not = "its answer is empty";
    return std::nullopt;
  }
  return response;
}

std::optional<HttpReply> exchange(const HttpExchange& request, std::string& why_not) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(request.timeout_s));
  TcpConnection connection = tcp_connect(request.host, request.port, deadline);
  why_not = connection.why_not;
  const Socket socket(connection.fd);
  if (socket.fd() < 0) return std::nullopt;
  if (!send_all(socket.fd(), request_text(request), deadline)) {
    why_not = Clock::now() >= deadline ? fmt::format("no whole answer within {:.1f} s", request.timeout_s)
                                       : "the connection closed while the request was sent";
    return std::nullopt;
  }
  const auto cut_off = [&](const std::string& otherwise) {
    why_not = Clock::now() >= deadline ? fmt::format("no whole answer within {:.1f} s", request.timeout_s) : otherwise;
    return std::nullopt;
  };
  // The head, read while it may still end within kMaxHeadBytes.
  std::string received;
  std::optional<HeadEnd> head_end;
  while (!(head_end = find_head_end(received))) {
    if (received.size() > kMaxHeadBytes) {
      why_not = fmt::format("its answer's head is longer than {} bytes: it is no coordinator's", kMaxHeadBytes);
      return std::nullopt;
    }
    const long got = receive_some(socket.fd(), received, kMaxHeadBytes + 4 - received.size(), deadline);
    if (got <= 0) return cut_off("the connection closed before a whole answer came");
  }
  if (head_end->head_size > kMaxHeadBytes) {
    why_not = fmt::format("its answer's head is longer than {} bytes: it is no coordinator's", kMaxHeadBytes);
    return std::nullopt;
  }
  std::optional<HttpReply> response =
      parse_response_head(std::string_view(received).substr(0, head_end->head_size), why_not);
  if (!response) return std::nullopt;
  // The body: as long as Content-Length says (the coordinator always sends one), else to the connection's end.
  std::string& body = response->body;
  body = received.substr(head_end->body_start);
  std::optional<std::size_t> length;
  if (const auto announced = response->headers.find("content-length"); announced != response->headers.end()) {
    std::uint64_t value = 0;
    const std::string& text = announced->second;
    const auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || stop != text.data() + text.size() || error != std::errc()) {
      why_not = "its answer's Content-Length is not a whole number";
      return std::nullopt;
    }
    if (value > request.max_body_bytes) {
      why_not = fmt::format("its answer was larger than {} MiB", request.max_body_bytes >> 20);
      return std::nullopt;
    }
    length = static_cast<std::size_t>(value);
  } else if (response->headers.count("transfer-encoding") > 0) {
    why_not = "its answer is sent in chunks (Transfer-Encoding), as no coordinator sends one";
    return std::nullopt;
  }
  constexpr std::size_t kReadBytes = 64 << 10;
  while (!length || body.size() < *length) {
    if (body.size() > request.max_body_bytes) {
      why_not = fmt::format("its answer was larger than {} MiB", request.max_body_bytes >> 20);
      return std::nullopt;
    }
    const std::size_t want = length ? std::min(kReadBytes, *length - body.size()) : kReadBytes;
    const long got = receive_some(socket.fd(), body, want, deadline);
    if (got < 0 || (got == 0 && length)) return cut_off("the connection closed before a whole answer came");
    if (got == 0) break;  // no Content-Length: the answer ends with the connection
  }
  if (length && body.size() > *length) body.resize(*length);
  return response;
}

}  // namespace loco::http
