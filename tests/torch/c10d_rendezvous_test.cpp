// The checks of c10d_rendezvous.h that read what the ranks left in their store, on an in-memory store: what
// another rank wrote, what it did not write, and what no rank writes (a port serving something else).
#include "loco/comm/c10d/c10d_rendezvous.h"

#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "loco/comm/comm_error.h"

namespace loco::comm {
namespace {

C10dOptions rank_of_two(int rank) {
  C10dOptions options;
  options.rank = rank;
  options.world_size = 2;
  options.master_addr = "127.0.0.1";
  options.master_port = 29999;
  return options;
}

std::string refusal(c10d::Store& store, const C10dOptions& options) {
  try {
    require_same_world_size(store, options);
  } catch (const CommError& e) {
    return e.what();
  }
  return "";
}

TEST(C10dRendezvous, RanksOfOneWorldSizePassAndOthersAreNamed) {
  c10d::HashStore store;
  announce_world_size(store, rank_of_two(0));
  EXPECT_EQ(refusal(store, rank_of_two(1)), "");  // rank 0 wrote 2
  EXPECT_EQ(refusal(store, rank_of_two(0)), "");  // rank 1 has not come yet: nothing to compare

  C10dOptions three = rank_of_two(1);
  three.world_size = 3;
  announce_world_size(store, three);
  const std::string message = refusal(store, rank_of_two(0));
  EXPECT_NE(message.find("rank 0 was started with WORLD_SIZE 2 but rank 1 with WORLD_SIZE 3"), std::string::npos)
      << message;
}

TEST(C10dRendezvous, AnAnswerNoRankWritesNamesTheStoreNotAWorldSize) {
  // What a port that answers garbage gave before: "rank 0 was started with WORLD_SIZE 2 but rank 1 with
  // WORLD_SIZE : every rank of a run must be given the same WORLD_SIZE", 45 times a second.
  for (const std::string& garbage :
       {std::string(), std::string("\xff\x1b[2J", 5), std::string(30, '7'), std::string("2 ")}) {
    c10d::HashStore store;
    store.set("loco/world_size/0", std::vector<std::uint8_t>(garbage.begin(), garbage.end()));
    const std::string message = refusal(store, rank_of_two(1));
    EXPECT_NE(message.find("the store at 127.0.0.1:29999 answered '"), std::string::npos) << message;
    EXPECT_NE(message.find("for rank 0's WORLD_SIZE, which no rank writes"), std::string::npos) << message;
    EXPECT_EQ(message.find("started with WORLD_SIZE"), std::string::npos) << message;
    EXPECT_EQ(message.find('\x1b'), std::string::npos) << "a control character reached the message";
  }
}

}  // namespace
}  // namespace loco::comm
