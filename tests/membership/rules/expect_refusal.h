// The membership rule tests' check of a refusal: `f` throws MembershipError of kind `refusal` whose
// message holds `text`.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "loco/membership/membership_error.h"

namespace loco::membership::test {

template <typename F>
void expect_refusal(F f, Refusal refusal, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no refusal";
  } catch (const MembershipError& e) {
    EXPECT_EQ(e.refusal(), refusal) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

}  // namespace loco::membership::test
