#include "loco/util/host_alone.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "loco/util/error.h"

namespace loco {

namespace {

[[noreturn]] void refuse(const std::string& value, const std::string& what, const std::string& problem) {
  throw ConfigError(fmt::format("{} '{}' {}", what, value, problem));
}

}  // namespace

std::string host_alone(const std::string& value, const std::string& what, const std::string& port_goes) {
  if (value.empty()) refuse(value, what, "is empty: give the host name or IP address");
  if (std::any_of(value.begin(), value.end(), [](unsigned char c) { return std::isspace(c) || std::iscntrl(c); })) {
    refuse(value, what, "holds a space or a control character: give the host name or IP address alone");
  }
  if (value.find("://") != std::string::npos || value.find('/') != std::string::npos) {
    refuse(value, what, "is a URL or a path: give the host name or IP address alone, without a scheme or a path");
  }
  if (value.front() == '[') {
    const std::size_t close = value.find(']');
    if (close == std::string::npos) refuse(value, what, "opens a '[' it does not close: give an IPv6 address as ::1");
    const std::string inside = value.substr(1, close - 1), after = value.substr(close + 1);
    if (!after.empty() && after.front() == ':') {
      refuse(
          value, what,
          fmt::format("holds a port ('{}'): give the port in {} and the host alone ('{}')", after, port_goes, inside));
    }
    if (!after.empty() || inside.empty()) refuse(value, what, "is not a host: give an IPv6 address as ::1");
    return inside;
  }
  if (value.find_first_of("[]") != std::string::npos) {
    refuse(value, what, "holds a '[' or ']' that is not around an IPv6 address: give it as ::1 or [::1]");
  }
  // One ':' is a port after a host name or an IPv4 address; an IPv6 address holds two or more.
  if (std::count(value.begin(), value.end(), ':') == 1) {
    const std::size_t colon = value.find(':');
    refuse(value, what,
           fmt::format("holds a port ('{}'): give the port in {} and the host alone ('{}')", value.substr(colon),
                       port_goes, value.substr(0, colon)));
  }
  return value;
}

}  // namespace loco
