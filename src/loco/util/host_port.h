// A listening address as users write it back: in a URL (http://HOST:PORT/) and in --coordinator or
// LOCO_COORDINATOR. An IPv6 address goes in brackets ([::1]:29400), as URLs and loco's address parser want it.
#pragma once

#include <string>

namespace loco {

// `host:port`, an IPv6 host bracketed.
std::string host_port(const std::string& host, int port);

// The same, to reach a server listening on `host` from elsewhere: a wildcard address (0.0.0.0, ::) is where
// it listens on every interface, not an address to reach it at, so this machine's host name stands for it.
std::string reachable_host_port(const std::string& host, int port);

}  // namespace loco
