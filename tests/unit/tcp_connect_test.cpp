// A connection to a host with several addresses (util/tcp_connect.h): a silent first address does not use up the
// deadline (before: a member never reached the address that answers, and gave up after comm.timeout_s), a
// refused one is passed over at once, and when none accepts each address is named with why.
#include "loco/util/tcp_connect.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "loco/util/seconds_since.h"

namespace loco {
namespace {

using Clock = std::chrono::steady_clock;

// A listener on `address`:`port` (0: a free one), its queue of one connection filled with `backlog_filler`s
// when `silent`: Linux then drops further SYNs without an answer, as a dead host or a broken route does.
class Listener {
 public:
  Listener(const char* address, int port, bool silent) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(static_cast<std::uint16_t>(port));
    ::inet_pton(AF_INET, address, &at.sin_addr);
    const int yes = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&at), sizeof(at)), 0);
    EXPECT_EQ(::listen(fd_, 0), 0);
    socklen_t length = sizeof(at);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&at), &length);
    port_ = ntohs(at.sin_port);
    for (int i = 0; silent && i < 2; ++i) {  // the queue holds one: the second and later are left unanswered
      const int filler = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      ::connect(filler, reinterpret_cast<sockaddr*>(&at), sizeof(at));
      fillers_.push_back(filler);
    }
  }
  ~Listener() {
    for (int filler : fillers_) ::close(filler);
    ::close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1, port_ = 0;
  std::vector<int> fillers_;
};

TEST(TcpConnect, ASilentFirstAddressDoesNotUseUpTheDeadline) {
  const Listener silent("127.0.0.2", 0, /*silent=*/true);
  const Listener live("127.0.0.1", silent.port(), /*silent=*/false);
  // The silent listener really is silent: alone, it uses up the deadline.
  auto start = Clock::now();
  TcpConnection alone = tcp_connect_any({"127.0.0.2"}, silent.port(), start + std::chrono::seconds(1));
  EXPECT_EQ(alone.fd, -1);
  EXPECT_GE(seconds_since(start), 0.9);
  EXPECT_EQ(alone.why_not, "the connection was not accepted in time");

  start = Clock::now();
  TcpConnection reached = tcp_connect_any({"127.0.0.2", "127.0.0.1"}, silent.port(), start + std::chrono::seconds(20));
  ASSERT_GE(reached.fd, 0) << reached.why_not;
  ::close(reached.fd);
  EXPECT_EQ(reached.address, "127.0.0.1");
  EXPECT_EQ(reached.addresses, 2u);
  EXPECT_LT(seconds_since(start), 5.0);  // about kNextAddressAfter (before: the whole 20 s, then a failure)
}

TEST(TcpConnect, ARefusedAddressIsPassedOverAndEveryFailureIsNamed) {
  int closed_port = 0;
  {
    const Listener gone("127.0.0.1", 0, false);
    closed_port = gone.port();
  }
  const Listener live("127.0.0.3", closed_port, false);
  TcpConnection reached =
      tcp_connect_any({"127.0.0.1", "127.0.0.3"}, closed_port, Clock::now() + std::chrono::seconds(20));
  ASSERT_GE(reached.fd, 0) << reached.why_not;
  ::close(reached.fd);
  EXPECT_EQ(reached.address, "127.0.0.3");

  const Listener silent("127.0.0.4", closed_port, true);
  const TcpConnection none =
      tcp_connect_any({"127.0.0.1", "127.0.0.4"}, closed_port, Clock::now() + std::chrono::seconds(1));
  EXPECT_EQ(none.fd, -1);
  EXPECT_EQ(none.why_not,
            "cannot connect to any of the 2 addresses of '127.0.0.1, 127.0.0.4': 127.0.0.1 "
            "(Connection refused), 127.0.0.4 (no answer)");
}

TEST(TcpConnect, AHostThatDoesNotResolveIsSaidSo) {
  const TcpConnection none = tcp_connect("no.such.host.invalid", 80, Clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(none.fd, -1);
  EXPECT_NE(none.why_not.find("the host name 'no.such.host.invalid' does not resolve"), std::string::npos);
}

}  // namespace
}  // namespace loco
