// A TCP connection to a host by name, as "Happy Eyeballs" (RFC 8305) makes one: the name's addresses are tried
// in the resolver's order, the next one started while the earlier ones are still unanswered after
// kNextAddressAfter, and the first that accepts is kept. Tried one after the other, a name whose first address
// is silent (a broken IPv6 route beside a working IPv4 one; a dead entry in /etc/hosts) spent the whole
// deadline on it, and the member or rank never reached the address that answers (audit round 14).
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace loco {

inline constexpr std::chrono::milliseconds kNextAddressAfter{250};

struct TcpConnection {
  int fd = -1;                // non-blocking, close-on-exec; -1: none of the addresses accepted by the deadline
  std::string address;        // the numeric address that accepted (IPv6 without brackets)
  std::size_t addresses = 0;  // how many the name resolved to
  std::string why_not;        // when fd is -1: what went wrong, each address's failure named when there are several
};

// The numeric form of an IPv4 or IPv6 socket address, an IPv6 one with its interface where it has one
// (fe80::1%eth0: without it a link-local address means nothing); "" for another family.
std::string numeric_address(const sockaddr& address);

// The caller owns `fd` (closes it).
TcpConnection tcp_connect(const std::string& host, int port, std::chrono::steady_clock::time_point deadline);

// The same over numeric addresses, tried in this order (what a name with several resolves to).
TcpConnection tcp_connect_any(const std::vector<std::string>& addresses, int port,
                              std::chrono::steady_clock::time_point deadline);

}  // namespace loco
