// loco's HTTP client (http/http_client.h) against peers that answer as no coordinator would: raw sockets on
// loopback, each answering every connection with the bytes a test gives. Audit round 11: cpp-httplib's client
// crashed (SIGSEGV) on a 50 KB status line and grew to 1.2 GB on a header line without its end.
#include "loco/http/http_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace loco::http {
namespace {

using Clock = std::chrono::steady_clock;

// A peer on a free loopback port that reads a request and answers `answer`, then closes (or, with
// `endless_tail`, sends it again and again until the client goes).
class CannedPeer {
 public:
  explicit CannedPeer(std::string answer, bool endless_tail = false) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    ::listen(fd_, 8);
    socklen_t length = sizeof(address);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this, endless_tail] {
      const int client = ::accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      char request[4096];
      (void)::recv(client, request, sizeof(request), 0);
      while (!stop_ && ::send(client, answer_.data(), answer_.size(), MSG_NOSIGNAL) > 0 && endless_tail) {
      }
      ::close(client);
    });
  }
  ~CannedPeer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  std::string answer_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::optional<HttpReply> ask(const CannedPeer& peer, std::string& why_not, double timeout_s = 5) {
  return exchange(HttpExchange{"127.0.0.1", peer.port(), "GET", "/status", {}, "", timeout_s, 1 << 20}, why_not);
}

TEST(HttpClient, AWellFormedAnswerIsReadWithItsHeadersAndBody) {
  CannedPeer peer(
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Loco-Mac: abc\r\nContent-Length: 7\r\n"
      "Connection: close\r\n\r\n{\"a\":1}extra");
  std::string why_not;
  const auto answer = ask(peer, why_not);
  ASSERT_TRUE(answer) << why_not;
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->body, "{\"a\":1}");
  EXPECT_EQ(answer->headers.at("x-loco-mac"), "abc");
  // Without a Content-Length, the body ends with the connection.
  CannedPeer closing("HTTP/1.0 403 Forbidden\n\nno");
  const auto closed = ask(closing, why_not);
  ASSERT_TRUE(closed) << why_not;
  EXPECT_EQ(closed->status, 403);
  EXPECT_EQ(closed->body, "no");
}

TEST(HttpClient, AnAnswerNoCoordinatorSendsIsRefusedWithinBounds) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"HTTP/1.1 200 " + std::string(50'000, 'a') + "\r\nContent-Length: 2\r\n\r\n{}", "head is longer than 8192"},
      {"HTTP/1.1 200 OK\r\n" + std::string(100, '\0') + "\r\n\r\n", "a header line that is not NAME: VALUE"},
      {"SSH-2.0-OpenSSH_9.2\r\n\r\n", "not HTTP/1.x"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}", "names the header Content-Length twice"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", "larger than 1 MiB"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", "sent in chunks"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", "closed before a whole answer came"}};
  for (const auto& [bytes, says] : cases) {
    CannedPeer peer(bytes);
    std::string why_not;
    EXPECT_FALSE(ask(peer, why_not)) << says;
    EXPECT_NE(why_not.find(says), std::string::npos) << why_not;
  }
  // A header line that never ends, and a body without an end: bounded in bytes, and in time.
  CannedPeer endless_header("HTTP/1.1 200 OK\r\nX-Junk: " + std::string(1 << 16, 'a'), true);
  std::string why_not;
  EXPECT_FALSE(ask(endless_header, why_not));
  EXPECT_NE(why_not.find("head is longer than 8192"), std::string::npos) << why_not;
  CannedPeer endless_body("HTTP/1.1 200 OK\r\n\r\n" + std::string(1 << 16, 'b'), true);
  EXPECT_FALSE(ask(endless_body, why_not));
  EXPECT_NE(why_not.find("larger than 1 MiB"), std::string::npos) << why_not;
}

TEST(HttpClient, APeerThatNeverAnswersIsCutOffAtTheDeadline) {
  const int silent = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(silent, 8), 0);  // accepted by the kernel, never answered
  socklen_t length = sizeof(address);
  ::getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length);
  const auto start = Clock::now();
  std::string why_not;
  EXPECT_FALSE(
      exchange(HttpExchange{"127.0.0.1", ntohs(address.sin_port), "POST", "/v1/x", {}, "{}", 0.5, 1 << 20}, why_not));
  EXPECT_NE(why_not.find("no whole answer within 0.5 s"), std::string::npos) << why_not;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 3.0);
  ::close(silent);
  EXPECT_FALSE(exchange(HttpExchange{"127.0.0.1", ntohs(address.sin_port), "GET", "/", {}, "", 1, 1 << 20}, why_not));
  EXPECT_NE(why_not.find("cannot connect: nothing listens at that address"), std::string::npos) << why_not;
  EXPECT_FALSE(exchange(HttpExchange{"no.such.host.invalid", 80, "GET", "/", {}, "", 5, 1 << 20}, why_not));
  EXPECT_NE(why_not.find("the host name 'no.such.host.invalid' does not resolve"), std::string::npos) << why_not;
}

}  // namespace
}  // namespace loco::http
