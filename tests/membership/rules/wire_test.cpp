// The coordinator's reading of a message's fields (src/loco/membership/wire.h): what is not JSON, and an
// integer beyond int64's range, are refused as such (a step of 2^63 used to read as -2^63, and a NaN literal
// was called "not a JSON object").
#include "loco/membership/wire.h"

#include <gtest/gtest.h>

#include "loco/membership/membership_error.h"
#include "membership/rules/expect_refusal.h"

namespace loco::membership {
namespace {

using test::expect_refusal;

TEST(Wire, WhatIsNotJsonIsCalledSo) {
  expect_refusal([] { parse_message(R"({"step": NaN})"); }, Refusal::malformed, "not valid JSON");
  expect_refusal([] { parse_message(R"({"step": 1e999})"); }, Refusal::malformed, "not valid JSON");
  expect_refusal([] { parse_message("[1, 2]"); }, Refusal::malformed, "not a JSON object");
  EXPECT_EQ(parse_message(R"({"step": 4})").at("step"), 4);
}

TEST(Wire, AnIntegerBeyondInt64IsRefusedNotWrapped) {
  EXPECT_EQ(field<std::int64_t>(parse_message(R"({"step": 9223372036854775807})"), "step"), INT64_MAX);
  EXPECT_EQ(field<std::int64_t>(parse_message(R"({"step": -9223372036854775808})"), "step"), INT64_MIN);
  for (const char* body : {R"({"step": 9223372036854775808})", R"({"step": 18446744073709551615})"}) {
    expect_refusal([&] { field<std::int64_t>(parse_message(body), "step"); }, Refusal::malformed,
                   "field 'step' is missing or not an integer from -2^63 to 2^63 - 1");
  }
  EXPECT_EQ(field<std::uint64_t>(parse_message(R"({"n": 18446744073709551615})"), "n"), UINT64_MAX);
}

}  // namespace
}  // namespace loco::membership
