#include "loco/util/tcp_connect.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace loco {

std::string numeric_address(const sockaddr& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text, sizeof(text));
    return text;
  }
  if (address.sa_family != AF_INET6) return "";
  const auto& six = reinterpret_cast<const sockaddr_in6&>(address);
  ::inet_ntop(AF_INET6, &six.sin6_addr, text, sizeof(text));
  std::string numeric = text;
  char interface[IF_NAMESIZE] = {};
  if (six.sin6_scope_id != 0 && ::if_indextoname(six.sin6_scope_id, interface) != nullptr) {
    numeric += std::string("%") + interface;
  }
  return numeric;
}

namespace {

using Clock = std::chrono::steady_clock;

int millis_until(Clock::time_point when) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(when - Clock::now()).count();
  return left > 0 ? static_cast<int>(std::min<long long>(left, 1 << 30)) : 0;
}

struct Attempt {
  int fd;
  std::size_t index;  // into the addresses
};

// The addresses of one or more resolutions, in order; freed with it.
class Resolved {
 public:
  Resolved() = default;
  Resolved(const Resolved&) = delete;
  Resolved& operator=(const Resolved&) = delete;
  ~Resolved() {
    for (addrinfo* head : heads_) ::freeaddrinfo(head);
  }
  // getaddrinfo's status.
  int add(const std::string& host, int port, int flags) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = flags;
    addrinfo* found = nullptr;
    const int status = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (status != 0) return status;
    heads_.push_back(found);
    for (const addrinfo* at = found; at != nullptr; at = at->ai_next) all.push_back(at);
    return 0;
  }
  std::vector<const addrinfo*> all;

 private:
  std::vector<addrinfo*> heads_;
};

TcpConnection connect_first(const std::string& host, const std::vector<const addrinfo*>& addresses,
                            Clock::time_point deadline) {
  TcpConnection result;
  result.addresses = addresses.size();
  std::vector<std::string> failures(addresses.size());  // "" while untried or unanswered
  std::vector<Attempt> pending;
  std::size_t next = 0;
  auto next_start = Clock::now();
  const auto settle = [&](const Attempt& attempt, int error) {
    if (error == 0) {
      result.fd = attempt.fd;
      result.address = numeric_address(*addresses[attempt.index]->ai_addr);
    } else {
      failures[attempt.index] = error == ETIMEDOUT ? "no answer" : std::strerror(error);
      ::close(attempt.fd);
    }
  };
  while (result.fd < 0 && Clock::now() < deadline && (next < addresses.size() || !pending.empty())) {
    if (next < addresses.size() && (pending.empty() || Clock::now() >= next_start)) {
      const addrinfo& at = *addresses[next];
      const Attempt attempt{::socket(at.ai_family, at.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, at.ai_protocol),
                            next++};
      if (attempt.fd < 0) {
        failures[attempt.index] = std::strerror(errno);
      } else if (::connect(attempt.fd, at.ai_addr, at.ai_addrlen) == 0) {
        settle(attempt, 0);
      } else if (errno == EINPROGRESS) {
        pending.push_back(attempt);
        next_start = Clock::now() + kNextAddressAfter;  // an attempt that failed at once holds up nothing
      } else {
        settle(attempt, errno);
      }
      continue;
    }
    std::vector<pollfd> watched;
    for (const Attempt& attempt : pending) watched.push_back({attempt.fd, POLLOUT, 0});
    const int wait =
        next < addresses.size() ? std::min(millis_until(next_start), millis_until(deadline)) : millis_until(deadline);
    if (::poll(watched.data(), watched.size(), wait) < 0 && errno != EINTR) break;
    std::vector<Attempt> still;
    for (std::size_t i = 0; i < pending.size(); ++i) {
      if (result.fd >= 0 || watched[i].revents == 0) {
        still.push_back(pending[i]);
        continue;
      }
      int error = 0;
      socklen_t length = sizeof(error);
      if (::getsockopt(pending[i].fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
      settle(pending[i], error);
    }
    pending = std::move(still);
  }
  for (const Attempt& attempt : pending) {  // unanswered by the deadline, or beaten by the one kept
    if (result.fd < 0) failures[attempt.index] = "no answer";
    ::close(attempt.fd);
  }
  if (result.fd < 0) {
    if (addresses.size() == 1) {
      result.why_not = failures[0] == "no answer" || failures[0].empty()
                           ? "the connection was not accepted in time"
                           : "cannot connect: nothing listens at that address, or a firewall is in the way";
    } else {
      std::vector<std::string> each;
      for (std::size_t i = 0; i < addresses.size(); ++i) {
        each.push_back(fmt::format("{} ({})", numeric_address(*addresses[i]->ai_addr),
                                   failures[i].empty() ? "not tried in time" : failures[i]));
      }
      result.why_not = fmt::format("cannot connect to any of the {} addresses of '{}': {}", addresses.size(), host,
                                   fmt::join(each, ", "));
    }
  }
  return result;
}

}  // namespace

TcpConnection tcp_connect(const std::string& host, int port, Clock::time_point deadline) {
  Resolved resolved;
  if (const int status = resolved.add(host, port, 0); status != 0) {
    TcpConnection result;
    result.why_not =
        fmt::format("cannot connect: the host name '{}' does not resolve ({})", host, ::gai_strerror(status));
    return result;
  }
  return connect_first(host, resolved.all, deadline);
}

TcpConnection tcp_connect_any(const std::vector<std::string>& addresses, int port, Clock::time_point deadline) {
  Resolved resolved;
  for (const std::string& address : addresses) {
    if (resolved.add(address, port, AI_NUMERICHOST) != 0) {
      TcpConnection result;
      result.why_not = fmt::format("'{}' is not a numeric address", address);
      return result;
    }
  }
  return connect_first(fmt::format("{}", fmt::join(addresses, ", ")), resolved.all, deadline);
}

}  // namespace loco
