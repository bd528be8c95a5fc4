// A host as MASTER_ADDR or `loco launch --master-addr` gives it, read as getaddrinfo takes it. Users carry
// over the forms of URLs and of LOCO_COORDINATOR ([::1]:29400, http://host:port/): taken verbatim, such a
// value made every rank, rank 0 too, wait for the whole rendezvous timeout and then blame rank 0 (audit round
// 14).
#pragma once

#include <string>

namespace loco {

// `value` with the brackets around an IPv6 address taken off ([::1] → ::1). ConfigError naming `what` and
// what else the value holds, and where that goes: a port (into `port_goes`), a scheme or a path, spaces.
std::string host_alone(const std::string& value, const std::string& what, const std::string& port_goes);

}  // namespace loco
