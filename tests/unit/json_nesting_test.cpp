// The nesting of a JSON text, counted before parsing (util/json_nesting.h).
#include "loco/util/json_nesting.h"

#include <gtest/gtest.h>

#include <string>

namespace loco {
namespace {

TEST(JsonNesting, CountsArraysAndObjectsOutsideStrings) {
  EXPECT_EQ(json_nesting("7", 10), 0u);
  EXPECT_EQ(json_nesting(R"({"a": [1, {"b": []}], "c": {}})", 10), 4u);
  EXPECT_EQ(json_nesting(R"(["[[[", "{{", "\"[[["])", 10), 1u);  // brackets in strings, an escaped quote
  EXPECT_EQ(json_nesting("[][][]", 10), 1u);
}

TEST(JsonNesting, StopsPastTheLimit) {
  const std::string deep(1 << 20, '[');
  EXPECT_EQ(json_nesting(deep, 32), 33u);
  EXPECT_EQ(json_nesting(std::string(32, '[') + std::string(32, ']'), 32), 32u);
  EXPECT_EQ(json_nesting("]]]][", 32), 1u);  // closers without openers do not count below zero
}

}  // namespace
}  // namespace loco
