// The bounds of loco's HTTP server (http/http_server.h) on what it holds for answers: how many requests it
// answers at once, and how long a reader may take to read an answer. Raw sockets on loopback.
#include "loco/http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace loco::http {
namespace {

using Clock = std::chrono::steady_clock;

// A server on a free loopback port, serving on a thread of its own until the test ends.
class RunningServer {
 public:
  explicit RunningServer(HttpServerLimits limits) : server_(limits) {}
  ~RunningServer() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  HttpServer& operator*() { return server_; }
  HttpServer* operator->() { return &server_; }
  void start() {
    ASSERT_TRUE(server_.bind("127.0.0.1", 0));
    thread_ = std::thread([this] { server_.serve(); });
  }

 private:
  HttpServer server_;
  std::thread thread_;
};

// A socket connected to the server from the loopback address `source` (every 127.x.y.z is this host's);
// with `small_buffer` its receive buffer is made small, so that the server's sends block once it is full
// and the reader does not read.
int connect_from(int port, const char* source, bool small_buffer) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int small = 4096;
  if (small_buffer) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  return fd;
}

void send_text(int fd, const std::string& text) {
  EXPECT_EQ(::send(fd, text.data(), text.size(), MSG_NOSIGNAL), static_cast<ssize_t>(text.size()));
}

// A connection that has sent `GET path`.
int send_get(int port, const std::string& path, bool small_buffer = true) {
  const int fd = connect_from(port, "127.0.0.1", small_buffer);
  send_text(fd, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
  return fd;
}

// Everything the server sends on `fd` until it closes the connection (or 20 s pass); closes fd.
std::string read_to_end(int fd) {
  timeval timeout{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string answer;
  char buffer[65536];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;) answer.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  return answer;
}

// A request for a path the server does not serve is told what it does serve (the dashboard answered with the
// coordinator's words: "docs/fault-tolerance.md lists the coordinator's requests").
TEST(HttpServer, AnUnknownPathIsToldTheRoutesServed) {
  RunningServer server(HttpServerLimits{});
  server->route("GET", "/status", [](const HttpRequest&, HttpResponse& res) { res.body = "{}"; });
  server->route("GET", "/history", [](const HttpRequest&, HttpResponse& res) { res.body = "{}"; });
  server.start();
  const std::string answer = read_to_end(send_get(server->port(), "/metrics"));
  EXPECT_NE(answer.find("404"), std::string::npos) << answer;
  EXPECT_NE(answer.find("no GET /metrics here; this server answers GET /history, GET /status"), std::string::npos)
      << answer;
}

// Headers for every answer reach the server's own refusals (404 here, and a request it cannot read) as well as
// the routes' answers, once, and a route that sets one itself keeps its own (the dashboard's and the coordinator's
// refusals came without their security headers).
TEST(HttpServer, HeadersForEveryAnswerReachItsRefusalsToo) {
  RunningServer server(HttpServerLimits{});
  server->add_header_to_every_answer("X-Content-Type-Options", "nosniff");
  server->route("GET", "/plain", [](const HttpRequest&, HttpResponse& res) { res.body = "{}"; });
  server->route("GET", "/own", [](const HttpRequest&, HttpResponse& res) {
    res.headers.emplace_back("x-content-type-options", "other");
  });
  server.start();
  const auto count = [](const std::string& text, const std::string& part) {
    std::size_t n = 0;
    for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
  };
  for (const char* path : {"/plain", "/nope"}) {
    const std::string answer = read_to_end(send_get(server->port(), path));
    EXPECT_EQ(count(answer, "X-Content-Type-Options: nosniff\r\n"), 1u) << answer;
  }
  const int fd = connect_from(server->port(), "127.0.0.1", false);
  send_text(fd, "POST /plain HTTP/1.1\r\nHost: x\r\n\r\n");  // no Content-Length: 411
  const std::string refused = read_to_end(fd);
  EXPECT_NE(refused.find("411"), std::string::npos) << refused;
  EXPECT_EQ(count(refused, "X-Content-Type-Options: nosniff\r\n"), 1u) << refused;
  const std::string own = read_to_end(send_get(server->port(), "/own"));
  EXPECT_EQ(count(own, "nosniff"), 0u) << own;
  EXPECT_EQ(count(own, "x-content-type-options: other"), 1u) << own;
}

// Two requests held in their handlers fill a server that answers two at once: a third gets 503 at once
// (with the refusal a member retries), and the two held ones are answered when they are let go.
TEST(HttpServer, ARequestBeyondTheAnswersAllowedAtOnceGets503) {
  HttpServerLimits limits;
  limits.max_answering_connections = 2;
  RunningServer server(limits);
  std::mutex mutex;
  std::condition_variable changed;
  int held = 0;
  bool released = false;
  server->route("GET", "/hold", [&](const HttpRequest&, HttpResponse& res) {
    std::unique_lock<std::mutex> lock(mutex);
    ++held;
    changed.notify_all();
    changed.wait(lock, [&] { return released; });
    res.body = "{\"held\": true}";
  });
  server.start();
  const int first = send_get(server->port(), "/hold"), second = send_get(server->port(), "/hold");
  {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(changed.wait_for(lock, std::chrono::seconds(10), [&] { return held == 2; }));
  }
  const std::string third = read_to_end(send_get(server->port(), "/hold"));
  EXPECT_EQ(third.rfind("HTTP/1.1 503", 0), 0u) << third;
  EXPECT_NE(third.find("\"refusal\":\"unavailable\""), std::string::npos) << third;
  EXPECT_NE(third.find("Retry-After: 2"), std::string::npos) << third;
  {
    std::lock_guard<std::mutex> lock(mutex);
    released = true;
  }
  changed.notify_all();
  for (const int fd : {first, second}) {
    const std::string answer = read_to_end(fd);
    EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  }
  // Their places are free again.
  const std::string after = read_to_end(send_get(server->port(), "/hold"));
  EXPECT_EQ(after.rfind("HTTP/1.1 200", 0), 0u) << after;
}

// A reader that takes its answer slower than answer_deadline_s allows is cut off, and its place is free
// (before, each send waited up to 5 s and a reader taking a byte now and then held its answer for ever).
TEST(HttpServer, AnAnswerNotReadWithinTheDeadlineIsCutOff) {
  HttpServerLimits limits;
  limits.max_answering_connections = 1;
  limits.answer_deadline_s = 1;
  RunningServer server(limits);
  constexpr std::size_t kBody = 32 << 20;
  server->route("GET", "/big", [&](const HttpRequest&, HttpResponse& res) { res.body.assign(kBody, 'x'); });
  server.start();
  const auto began = Clock::now();
  const int slow = send_get(server->port(), "/big");
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // reads nothing for longer than the deadline
  const std::string cut = read_to_end(slow);
  EXPECT_LT(cut.size(), kBody) << "the whole answer waited for a reader past its deadline";
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - began).count(), 15.0);
  // Read at full speed: through a 4 KiB buffer, 32 MB could take longer than the 1 s deadline on a busy machine.
  const std::string next = read_to_end(send_get(server->port(), "/big", /*small_buffer=*/false));
  EXPECT_EQ(next.rfind("HTTP/1.1 200", 0), 0u) << next.substr(0, 200);
  EXPECT_GT(next.size(), kBody);
}

// A flood of connections from one address that never finish their request fills the places of those still
// sending theirs: the server closes the flood's own oldest connections to admit the rest, not the older one
// of a member on another host, whose request is then answered (before, the longest waiting one was closed,
// whoever sent it).
TEST(HttpServer, AFloodFromOneAddressClosesItsOwnConnectionsNotAnotherHosts) {
  HttpServerLimits limits;
  limits.max_waiting_connections = 4;
  RunningServer server(limits);
  server->route("GET", "/status", [](const HttpRequest&, HttpResponse& res) { res.body = "{}"; });
  server.start();
  const int member = connect_from(server->port(), "127.0.0.2", /*small_buffer=*/false);
  send_text(member, "GET /status HTTP/1.1\r\n");                // the rest of its head comes after the flood
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // admitted before the flood: the oldest
  std::vector<int> flood;
  for (int i = 0; i < 8; ++i) {
    flood.push_back(connect_from(server->port(), "127.0.0.1", /*small_buffer=*/false));
    send_text(flood.back(), "GET /status HTTP/1.1\r\n");
  }
  // Nine connections, four places: five are closed, the flood's five oldest. The fifth being closed shows
  // that the last one was admitted.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(read_to_end(flood[i]), "") << "flood connection " << i;
  send_text(member, "Host: x\r\n\r\n");
  const std::string answer = read_to_end(member);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << "the member's connection was closed for the flood: " << answer;
  for (int i = 5; i < 8; ++i) ::close(flood[i]);
}

}  // namespace
}  // namespace loco::http
