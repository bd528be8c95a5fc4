// MASTER_ADDR and --master-addr read as getaddrinfo takes them (util/host_alone.h): an IPv6 address in
// brackets as URLs write it is taken without them; a port, a URL, a path or spaces are refused at once, naming
// where the port goes (before: every rank, rank 0 too, waited for the whole rendezvous timeout, then blamed
// rank 0 for not running).
#include "loco/util/host_alone.h"

#include <gtest/gtest.h>

#include "loco/util/error.h"

namespace loco {
namespace {

std::string refusal(const std::string& value) {
  try {
    host_alone(value, "MASTER_ADDR", "MASTER_PORT");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(HostAlone, HostsAndAddressesAreTakenAsGiven) {
  for (const std::string host : {"127.0.0.1", "node0", "node-0.cluster.local", "::1", "fe80::1%eth0", "::"}) {
    EXPECT_EQ(host_alone(host, "MASTER_ADDR", "MASTER_PORT"), host);
  }
  EXPECT_EQ(host_alone("[::1]", "MASTER_ADDR", "MASTER_PORT"), "::1");
  EXPECT_EQ(host_alone("[fe80::1%eth0]", "MASTER_ADDR", "MASTER_PORT"), "fe80::1%eth0");
}

TEST(HostAlone, APortAUrlOrSpacesAreRefusedNamingWhereThePortGoes) {
  EXPECT_EQ(refusal("127.0.0.1:29500"),
            "MASTER_ADDR '127.0.0.1:29500' holds a port (':29500'): give the port in MASTER_PORT and the host alone "
            "('127.0.0.1')");
  EXPECT_EQ(refusal("[::1]:29500"),
            "MASTER_ADDR '[::1]:29500' holds a port (':29500'): give the port in MASTER_PORT and the host alone "
            "('::1')");
  EXPECT_NE(refusal("http://node0").find("is a URL or a path"), std::string::npos);
  EXPECT_NE(refusal("node0/").find("is a URL or a path"), std::string::npos);
  EXPECT_NE(refusal("127.0.0.1 ").find("holds a space"), std::string::npos);
  EXPECT_NE(refusal(" node0").find("holds a space"), std::string::npos);
  EXPECT_NE(refusal("[::1").find("opens a '[' it does not close"), std::string::npos);
  EXPECT_NE(refusal("[]").find("is not a host"), std::string::npos);
  EXPECT_NE(refusal("").find("is empty"), std::string::npos);
  EXPECT_NE(refusal("[::1]x").find("is not a host"), std::string::npos);
  EXPECT_NE(refusal("::1]").find("holds a '[' or ']' that is not around an IPv6 address"), std::string::npos);
  EXPECT_NE(refusal("fe80::[1]").find("holds a '[' or ']'"), std::string::npos);
}

}  // namespace
}  // namespace loco
