// JSON as Python's json module writes it, rewritten into JSON (util/python_json.h).
#include "loco/util/python_json.h"

#include <gtest/gtest.h>

#include <string>

namespace loco {
namespace {

std::string rewritten(std::string json, std::size_t expected_rewrites) {
  EXPECT_EQ(rewrite_python_json_extensions(json), expected_rewrites) << json;
  return json;
}

TEST(PythonJson, NonFiniteLiteralsOutsideStringsBecomeNull) {
  EXPECT_EQ(rewritten(R"({"a": NaN, "b": [Infinity, -Infinity, -1.5], "text": "x"})", 3),
            R"({"a": null, "b": [null, null, -1.5], "text": "x"})");
  EXPECT_EQ(rewritten(R"({"text": "NaN Infinity -Infinity"})", 0), R"({"text": "NaN Infinity -Infinity"})");
}

TEST(PythonJson, NumbersBeyondDoublesRangeBecomeNullAndOthersStay) {
  EXPECT_EQ(rewritten(R"({"a": 1e400, "b": -2.5E+999, "c": [1e308, -0.0, 1e-400, 123456789012345678901234567890]})", 2),
            R"({"a": null, "b": null, "c": [1e308, -0.0, 1e-400, 123456789012345678901234567890]})");
  EXPECT_EQ(rewritten("[1e999", 1), "[null");  // at the end of the text
}

TEST(PythonJson, ALoneSurrogateEscapeBecomesTheReplacementCharacterAndAPairStays) {
  EXPECT_EQ(rewritten(R"({"text": "cut \ud83d", "b": "\uDC00x"})", 2), R"({"text": "cut \ufffd", "b": "\ufffdx"})");
  EXPECT_EQ(rewritten(R"({"text": "\ud83d\ude00 \ud800\ud800\udc00"})", 1),
            R"({"text": "\ud83d\ude00 \ufffd\ud800\udc00"})");  // a high surrogate before a pair
  EXPECT_EQ(rewritten(R"({"text": "\ude00\ud83d"})", 2), R"({"text": "\ufffd\ufffd"})");  // the wrong order
  // An escaped backslash before "ud800" is text, not an escape; a quote escaped does not end the string.
  EXPECT_EQ(rewritten(R"({"text": "\\ud800 \" NaN"})", 0), R"({"text": "\\ud800 \" NaN"})");
  EXPECT_EQ(rewritten(R"({"text": "\ud80"})", 0), R"({"text": "\ud80"})");  // no escape: the parser's to refuse
  EXPECT_EQ(rewritten(R"({"text": "\ud800)", 1), R"({"text": "\ufffd)");    // cut short: rewritten, still refused
}

TEST(PythonJson, ValidJsonIsLeftAsItIs) {
  const std::string valid =
      R"({"text": "caf\u00e9 \ud83d\ude00 \t\\ 1e999", "n": [1e5, -2, true, false, null], "o": {}, "-1e999": 0})";
  EXPECT_EQ(rewritten(valid, 0), valid);
}

}  // namespace
}  // namespace loco
