#include "loco/http/http_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <system_error>
#include <thread>

namespace loco::http {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kAcceptBacklog = 1024;                   // the kernel caps it at net.core.somaxconn
constexpr auto kLingerTime = std::chrono::seconds(1);  // see drain_unread
constexpr std::size_t kLingerBytes = 256 * 1024;

// The connection closed, was closed by the server, or ran past its deadline: nothing is answered.
struct ConnectionLost {};

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 202:
      return "Accepted";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
  }
  return "Unknown";
}

std::string peer_address(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "?";
  char text[INET6_ADDRSTRLEN] = "?";
  if (address.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&address)->sin_addr, text, sizeof(text));
  } else if (address.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&address)->sin6_addr, text, sizeof(text));
  }
  return text;
}

Clock::time_point after_seconds(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Sends `bytes` whole before `deadline`; false when the reader closed or did not take them in time.
bool send_all(int fd, const std::string& bytes, Clock::time_point deadline) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd wait{fd, POLLOUT, 0};
    const int ready = ::poll(&wait, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

// Up to `capacity` bytes that arrive before `deadline`; ConnectionLost when none can.
std::string receive(int fd, std::size_t capacity, Clock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) throw ConnectionLost{};
    pollfd wait{fd, POLLIN, 0};
    const int ready = ::poll(&wait, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) throw ConnectionLost{};
    std::string chunk(capacity, '\0');
    const ssize_t n = ::recv(fd, chunk.data(), capacity, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) throw ConnectionLost{};
    chunk.resize(static_cast<std::size_t>(n));
    return chunk;
  }
}

using Headers = std::vector<std::pair<std::string, std::string>>;

bool same_header_name(const std::string& a, const std::string& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  });
}

// The answer's bytes, with `every_answer`'s headers that it does not set itself.
std::string response_bytes(const HttpResponse& response, const Headers& every_answer) {
  std::string out =
      fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n", response.status,
                  reason_phrase(response.status), response.content_type, response.body.size());
  for (const auto& [name, value] : response.headers) out += fmt::format("{}: {}\r\n", name, value);
  for (const auto& [name, value] : every_answer) {
    const bool set = std::any_of(response.headers.begin(), response.headers.end(),
                                 [&](const auto& header) { return same_header_name(header.first, name); });
    if (!set) out += fmt::format("{}: {}\r\n", name, value);
  }
  out += "\r\n";
  out += response.body;
  return out;
}

HttpResponse refusal_response(int status, const std::string& what, const char* refusal = "malformed") {
  HttpResponse response;
  response.status = status;
  response.body =
      nlohmann::json{{"error", what}, {"refusal", refusal}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return response;
}

}  // namespace

struct HttpServer::Impl {
  struct Connection {
    int fd = -1;
    std::string address;  // the peer's, as peer_address gives it
    Clock::time_point since;
    bool waiting = true;     // still sending its request: may be closed to admit a newer one
    bool answering = false;  // counted in `answering`
  };

  HttpServerLimits limits;
  std::map<std::pair<std::string, std::string>, HttpHandler> routes;  // by (method, path)
  Headers every_answer;
  int listen_fd = -1;
  int port = 0;
  std::atomic<bool> stopping{false};
  std::mutex mutex;  // guards connections
  std::condition_variable all_closed;
  std::map<std::uint64_t, Connection> connections;  // by a number of their own
  std::uint64_t next_connection = 0;
  std::size_t answering = 0;  // connections whose request is being answered

  // Registers `fd`, from `address`; when too many connections still send their request, closes one to make
  // room (its thread then finds it closed): the one that has waited longest among those of the address
  // with the most waiting. So a flood from one address closes its own connections, not a member's from
  // another host that happens to be the oldest.
  std::uint64_t admit(int fd, std::string address) {
    std::lock_guard<std::mutex> lock(mutex);
    std::map<std::string_view, std::size_t> waiting_by_address;
    std::size_t waiting = 0;
    for (const auto& [id, c] : connections) {
      if (!c.waiting) continue;
      ++waiting;
      ++waiting_by_address[c.address];
    }
    if (waiting >= limits.max_waiting_connections) {
      Connection* victim = nullptr;
      std::size_t victim_address_waiting = 0;
      for (auto& [id, c] : connections) {
        if (!c.waiting) continue;
        const std::size_t of_address = waiting_by_address[c.address];
        if (!victim || of_address > victim_address_waiting ||
            (of_address == victim_address_waiting && c.since < victim->since)) {
          victim = &c;
          victim_address_waiting = of_address;
        }
      }
      if (victim) {
        ::shutdown(victim->fd, SHUT_RDWR);
        victim->waiting = false;
      }
    }
    const std::uint64_t id = next_connection++;
    connections[id] = {fd, std::move(address), Clock::now(), true};
    return id;
  }

  // The request of connection `id` is read: it is answered (never closed for a newcomer: a long poll is
  // answered in its time), unless max_answering_connections are answered already (false).
  bool begin_answer(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex);
    Connection& c = connections.at(id);
    c.waiting = false;
    if (answering >= limits.max_answering_connections) return false;
    c.answering = true;
    ++answering;
    return true;
  }

  // Closed after it left the list: its number, reused by the next accept, must not be shut for this one.
  void forget(std::uint64_t id, int fd) {
    std::lock_guard<std::mutex> lock(mutex);
    if (connections.at(id).answering) --answering;
    connections.erase(id);
    ::close(fd);
    if (connections.empty()) all_closed.notify_all();
  }

  // The request on `fd`, whole, within the deadline. HttpRefusal for one refused from its head.
  HttpRequest read_request(int fd, Clock::time_point deadline) {
    std::string bytes;
    std::optional<HeadEnd> head_end;
    while (!(head_end = find_head_end(bytes))) {
      if (bytes.size() > kMaxHeadBytes + 4) {
        throw HttpRefusal(
            431, fmt::format("the request's head is over {} bytes; loco's members send a few hundred", kMaxHeadBytes));
      }
      bytes += receive(fd, kMaxHeadBytes + 4 - bytes.size() + 1, deadline);
    }
    HttpRequest request =
        parse_request_head(std::string_view(bytes).substr(0, head_end->head_size), limits.max_body_bytes);
    request.body = bytes.substr(head_end->body_start);
    if (request.body.size() > request.content_length) {
      throw HttpRefusal(400, "the request holds more bytes than its Content-Length; send one request per connection");
    }
    if (request.body.size() < request.content_length && request.header("expect") == "100-continue") {
      send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", deadline);
    }
    while (request.body.size() < request.content_length) {
      request.body += receive(fd, request.content_length - request.body.size(), deadline);
    }
    request.remote_addr = peer_address(fd);
    return request;
  }

  void dispatch(const HttpRequest& request, HttpResponse& response) {
    const auto route = routes.find({request.method, request.path});
    if (route == routes.end()) {
      // Said from the routes themselves: the coordinator and the dashboard serve different ones.
      std::vector<std::string> served;
      for (const auto& [key, handler] : routes) served.push_back(key.first + " " + key.second);
      response = refusal_response(404, fmt::format("no {} {} here; this server answers {}", request.method,
                                                   request.path, fmt::join(served, ", ")));
      return;
    }
    try {
      route->second(request, response);
    } catch (const std::exception& e) {  // a bug, not the request: answered, never the end of the server
      response = refusal_response(500, fmt::format("the server could not answer: {}", e.what()), "internal");
    }
  }

  // A refused request may leave bytes unread; closing a socket with unread bytes makes the kernel send a
  // reset, which can discard the answer before the client reads it. So the rest is read and dropped, for
  // a bounded time and number of bytes, after the answer was sent.
  void drain_unread(int fd) {
    ::shutdown(fd, SHUT_WR);
    const auto deadline = Clock::now() + kLingerTime;
    std::size_t drained = 0;
    try {
      while (drained < kLingerBytes) drained += receive(fd, 16 * 1024, deadline).size();
    } catch (const ConnectionLost&) {
    }
  }

  void serve_connection(std::uint64_t id, int fd) {
    HttpResponse response;
    bool refused = false;
    try {
      const HttpRequest request = read_request(fd, after_seconds(limits.request_deadline_s));
      if (begin_answer(id)) {
        dispatch(request, response);
      } else {
        response = refusal_response(503,
                                    fmt::format("the server answers {} requests already; ask again in a few seconds",
                                                limits.max_answering_connections),
                                    "unavailable");
        response.headers.emplace_back("Retry-After", "2");
      }
      send_all(fd, response_bytes(response, every_answer), after_seconds(limits.answer_deadline_s));
    } catch (const HttpRefusal& e) {
      send_all(fd, response_bytes(refusal_response(e.status(), e.what()), every_answer),
               after_seconds(limits.answer_deadline_s));
      refused = true;
    } catch (const ConnectionLost&) {
    }
    if (refused) drain_unread(fd);
    forget(id, fd);
  }
};

HttpServer::HttpServer(HttpServerLimits limits) : impl_(std::make_unique<Impl>()) { impl_->limits = limits; }

HttpServer::~HttpServer() {
  stop();
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
}

void HttpServer::route(const std::string& method, const std::string& path, HttpHandler handler) {
  impl_->routes[{method, path}] = std::move(handler);
}

void HttpServer::add_header_to_every_answer(const std::string& name, const std::string& value) {
  impl_->every_answer.emplace_back(name, value);
}

bool HttpServer::bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  for (addrinfo* a = found; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR lets a restarted coordinator take its port back at once; SO_REUSEPORT is not set, so a
    // second coordinator cannot listen on the same port and take half the run's connections.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, kAcceptBacklog) == 0) {
      impl_->listen_fd = fd;
      break;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (impl_->listen_fd < 0) return false;
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ::getsockname(impl_->listen_fd, reinterpret_cast<sockaddr*>(&bound), &length);
  impl_->port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                  : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return true;
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::serve() {
  Impl& s = *impl_;
  while (!s.stopping) {
    pollfd wait{s.listen_fd, POLLIN, 0};
    if (::poll(&wait, 1, 100) <= 0) continue;  // 100 ms: how long stop() may wait for this loop
    const int fd = ::accept4(s.listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors: the waiting connections are being closed by their deadlines; try again soon.
      if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    const std::uint64_t id = s.admit(fd, peer_address(fd));
    try {
      std::thread([&s, id, fd] { s.serve_connection(id, fd); }).detach();
    } catch (const std::system_error&) {  // no thread to be had (a limit of the system): this one is closed
      s.forget(id, fd);
    }
  }
  std::unique_lock<std::mutex> lock(s.mutex);
  for (auto& [id, c] : s.connections) ::shutdown(c.fd, SHUT_RDWR);
  s.all_closed.wait(lock, [&s] { return s.connections.empty(); });
}

void HttpServer::stop() { impl_->stopping = true; }

}  // namespace loco::http
