// Numbers in user input (util/parse_number.h): a finite double however small, never an infinity or NaN.
#include "loco/util/parse_number.h"

#include <gtest/gtest.h>

namespace loco {
namespace {

TEST(ParseNumber, NumbersBelowTheNormalRangeAreStillNumbers) {
  // std::stod threw out_of_range for these, and `simulate --step-time 1e-320` was "not a finite number".
  ASSERT_TRUE(parse_whole_number("1e-320").has_value());
  EXPECT_GT(*parse_whole_number("1e-320"), 0.0);
  EXPECT_EQ(parse_whole_number("1e-308"), 1e-308);
  EXPECT_EQ(parse_whole_number("-2.5"), -2.5);
  EXPECT_EQ(parse_whole_number(" +1.5E3"), 1500.0);
}

TEST(ParseNumber, InfinitiesNanAndTrailingTextAreRefused) {
  // Hexadecimal too: strtod reads 0x10 as 16 (`loco fit` took a column of 0x10 as sizes).
  for (const char* text : {"1e999", "-1e999", "inf", "nan", "", "abc", "3x", "1e", "0x10", "0x1p30", "-0X1"}) {
    EXPECT_FALSE(parse_whole_number(text).has_value()) << text;
  }
  const auto leading = parse_leading_number("3x");
  ASSERT_TRUE(leading.has_value());
  EXPECT_EQ(leading->value, 3.0);
  EXPECT_EQ(leading->used, 1u);
}

}  // namespace
}  // namespace loco
