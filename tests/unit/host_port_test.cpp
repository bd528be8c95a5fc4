// Listening addresses written back for users (util/host_port.h): an IPv6 host in brackets, as a URL and
// loco's --coordinator parser want it; a wildcard host named by this machine's name.
#include "loco/util/host_port.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace loco {
namespace {

TEST(HostPort, AnIpv6HostIsBracketed) {
  EXPECT_EQ(host_port("127.0.0.1", 29400), "127.0.0.1:29400");
  EXPECT_EQ(host_port("coord.example", 80), "coord.example:80");
  EXPECT_EQ(host_port("::1", 29400), "[::1]:29400");  // before: http://::1:29400/, which no browser opens
  EXPECT_EQ(host_port("fe80::1%eth0", 7), "[fe80::1%eth0]:7");
  EXPECT_EQ(host_port("[::1]", 7), "[::1]:7");
}

TEST(HostPort, AWildcardHostIsReachedByThisMachinesName) {
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof(name) - 1), 0);
  EXPECT_EQ(reachable_host_port("0.0.0.0", 8), std::string(name) + ":8");  // before: http://0.0.0.0:8/
  EXPECT_EQ(reachable_host_port("::", 8), std::string(name) + ":8");       // before: http://:::8/
  EXPECT_EQ(reachable_host_port("::1", 8), "[::1]:8");
  EXPECT_EQ(reachable_host_port("10.0.0.2", 8), "10.0.0.2:8");
}

}  // namespace
}  // namespace loco
