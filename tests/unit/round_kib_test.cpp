// The round size of the pacing, as the config checks and the exchanges read it (util/round_kib.h).
#include "loco/util/round_kib.h"

#include <gtest/gtest.h>

namespace loco {
namespace {

TEST(RoundKib, SizesInKibAreBytesPerPeerAndRound) {
  EXPECT_EQ(round_kib_bytes("32"), 32768);
  EXPECT_EQ(round_kib_bytes("0.5"), 512);
  EXPECT_EQ(round_kib_bytes("0.0009765625"), 1);
  EXPECT_EQ(round_kib_bytes("0"), 0);  // one round, as off
}

TEST(RoundKib, WhatIsNoRoundSizeIsRefused) {
  for (const char* text : {"1e-30", "0.0001", "0.0005", "-1", "x", "", "nan", "0x20", "1e13", "4611686018427387904"}) {
    EXPECT_FALSE(round_kib_bytes(text)) << text;
  }
  EXPECT_NE(round_kib_error("comm.round_kib", "1e-30").find("comm.round_kib '1e-30' is not a round size"),
            std::string::npos);
}

}  // namespace
}  // namespace loco
