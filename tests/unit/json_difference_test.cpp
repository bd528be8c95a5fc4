// util/json_difference.h: the first key whose value differs between two objects of sections.
#include "loco/util/json_difference.h"

#include <gtest/gtest.h>

namespace loco {
namespace {

TEST(JsonDifference, TheFirstKeyInSortedOrderWithBothValues) {
  const nlohmann::json a = {{"train", {{"steps", 80}, {"seed", 1}}}, {"model", {{"hidden_size", 64}}}};
  EXPECT_FALSE(first_key_difference(a, a));
  nlohmann::json b = a;
  b["train"]["steps"] = 10;
  b["train"]["seed"] = 7;  // "train.seed" sorts before "train.steps"
  auto difference = first_key_difference(a, b);
  ASSERT_TRUE(difference);
  EXPECT_EQ(difference->key, "train.seed");
  EXPECT_EQ(value_text(difference->in_a), "1");
  EXPECT_EQ(value_text(difference->in_b), "7");
  // A key on one side only: absent on the other.
  b = a;
  b["optim"] = {{"lr", 0.5}};
  difference = first_key_difference(a, b);
  ASSERT_TRUE(difference);
  EXPECT_EQ(difference->key, "optim.lr");
  EXPECT_FALSE(difference->in_a);
  EXPECT_EQ(value_text(difference->in_a), "(none)");
  EXPECT_EQ(value_text(difference->in_b), "0.5");
  // An empty section holds no key; a value of the string "(none)" is not an absent key.
  b = a;
  b["comm"] = nlohmann::json::object();
  EXPECT_FALSE(first_key_difference(a, b));
  b["comm"]["codec"] = "(none)";
  EXPECT_TRUE(first_key_difference(a, b));
}

}  // namespace
}  // namespace loco
