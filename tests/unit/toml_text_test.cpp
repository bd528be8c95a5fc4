#include "loco/config/toml_text.h"

#include <gtest/gtest.h>

#include <string>

namespace loco {
namespace {

std::optional<std::size_t> deeper_than_two(const std::string& toml) { return first_nesting_deeper_than(toml, 2); }

TEST(TomlNesting, CountsArraysInlineTablesAndHeaders) {
  EXPECT_EQ(deeper_than_two("[model]\nx = [1, 2]\ny = {a = 1}\n[[runs]]\n"), std::nullopt);
  EXPECT_EQ(deeper_than_two("x = [[1], [2]]\n"), std::nullopt);
  EXPECT_EQ(deeper_than_two("x = [[[1]]]\n"), 6u);     // the third '['
  EXPECT_EQ(deeper_than_two("x = [{a = [1]}]\n"), 10u);  // an array in a table in an array
  EXPECT_EQ(deeper_than_two("x = [[1]]\ny = [[[2]]]"), 16u);  // closed levels are left
}

TEST(TomlNesting, BracketsInStringsAndCommentsDoNotCount) {
  EXPECT_EQ(deeper_than_two("a = \"[[[[\"\nb = '{{{{'\n# [[[[[[\n"), std::nullopt);
  EXPECT_EQ(deeper_than_two("a = \"\\\"[[[\"\n"), std::nullopt);              // an escaped quote stays inside
  EXPECT_EQ(deeper_than_two("a = \"\"\"\n[[[\n\"\"\"\nb = '''\n{{{\n'''\n"), std::nullopt);  // multi-line strings
  EXPECT_EQ(deeper_than_two("a = 'C:\\' # [[[\nx = [[[1]]]"), 22u);  // no escapes in literal strings
  EXPECT_EQ(deeper_than_two("a = \"open\nx = [[[1]]]"), 16u);         // an unclosed string ends at its line
}

TEST(TomlNesting, TheConfigLimitLeavesRoomAndStopsARunaway) {
  EXPECT_EQ(first_nesting_deeper_than("x = " + std::string(kMaxTomlNesting, '[') + std::string(kMaxTomlNesting, ']'),
                                      kMaxTomlNesting),
            std::nullopt);
  EXPECT_EQ(first_nesting_deeper_than("x = " + std::string(100000, '['), kMaxTomlNesting), 4u + kMaxTomlNesting);
}

TEST(TomlErrors, SayTheProblemWithoutToml11sFunctionNames) {
  EXPECT_EQ(toml_parse_error_text("[error] toml::insert_value: value (\"hidden_size\") already exists.\n --> x.toml"),
            "the key hidden_size is given twice; TOML allows each key and table once, so remove one\n --> x.toml");
  EXPECT_EQ(toml_parse_error_text("[error] toml::insert_value: table (\"model\") already exists."),
            "the table model is given twice; TOML allows each key and table once, so remove one");
  EXPECT_EQ(toml_parse_error_text("[error] toml::parse_key_value_pair: missing value after key-value separator '='"),
            "missing value after key-value separator '='");
  EXPECT_EQ(toml_parse_error_text("something else"), "something else");
}

TEST(TomlLines, TheFirstLineLongerThanTheLimitIsFound) {
  EXPECT_EQ(first_line_longer_than("abc\nde\n", 3), std::nullopt);
  EXPECT_EQ(first_line_longer_than("abc\nde\nfghi", 3), 7u);  // the last line has no newline
  EXPECT_EQ(first_line_longer_than("abcd\n", 3), 0u);
  EXPECT_EQ(first_line_longer_than("", 0), std::nullopt);
  EXPECT_EQ(first_line_longer_than("\n\nx", 0), 2u);
}

}  // namespace
}  // namespace loco
