#include "loco/util/host_port.h"

#include <fmt/format.h>
#include <unistd.h>

namespace loco {

std::string host_port(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  return ipv6 ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

std::string reachable_host_port(const std::string& host, int port) {
  if (host == "0.0.0.0" || host == "::" || host == "[::]") {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') return host_port(name, port);
  }
  return host_port(host, port);
}

}  // namespace loco
