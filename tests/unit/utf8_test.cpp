#include "loco/util/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace loco {
namespace {

std::optional<std::size_t> check(const std::string& bytes) { return first_invalid_utf8(bytes); }

TEST(Utf8, WellFormedSequencesOfEveryLengthPass) {
  EXPECT_EQ(check(""), std::nullopt);
  EXPECT_EQ(check("plain ascii\n"), std::nullopt);
  EXPECT_EQ(check("\xc3\xa9"), std::nullopt);          // U+00E9
  EXPECT_EQ(check("\xe2\x82\xac"), std::nullopt);      // U+20AC
  EXPECT_EQ(check("\xed\x9f\xbf"), std::nullopt);      // U+D7FF, the last before the surrogates
  EXPECT_EQ(check("\xf0\x9f\x98\x80"), std::nullopt);  // U+1F600
  EXPECT_EQ(check("\xf4\x8f\xbf\xbf"), std::nullopt);  // U+10FFFF, the last code point
}

TEST(Utf8, TheFirstBadByteIsNamed) {
  EXPECT_EQ(check("ab\xff"), 2u);                  // never a UTF-8 byte
  EXPECT_EQ(check("a\x80"), 1u);                   // a continuation byte without a lead
  EXPECT_EQ(check("\xc0\x80"), 0u);                // overlong NUL
  EXPECT_EQ(check("\xe0\x80\x80"), 0u);            // overlong three-byte form
  EXPECT_EQ(check("\xf0\x80\x80\x80"), 0u);        // overlong four-byte form
  EXPECT_EQ(check("ok\xed\xa0\x80"), 2u);          // U+D800, a surrogate
  EXPECT_EQ(check("\xf4\x90\x80\x80"), 0u);        // past U+10FFFF
  EXPECT_EQ(check("\xf5\x80\x80\x80"), 0u);        // a lead byte beyond F4
  EXPECT_EQ(check("x\xe2\x82"), 1u);               // cut short by the end
  EXPECT_EQ(check("\xe2\x82x"), 0u);               // cut short by an ASCII byte
  EXPECT_EQ(check("\xc3\xa9\xc3"), 2u);            // the good sequence before it passes
}

TEST(Utf8, APrefixEndsBetweenCharacters) {
  EXPECT_EQ(utf8_prefix("abc", 3), "abc");
  EXPECT_EQ(utf8_prefix("abcd", 3), "abc");
  EXPECT_EQ(utf8_prefix("a\xc3\xa9", 2), "a");                  // é would be cut after its first byte
  EXPECT_EQ(utf8_prefix("a\xc3\xa9z", 3), "a\xc3\xa9");
  EXPECT_EQ(utf8_prefix("ab\xf0\x9f\x98\x80", 5), "ab");      // U+1F600 needs bytes 2-5
  EXPECT_EQ(utf8_prefix("ab\xf0\x9f\x98\x80z", 6), "ab\xf0\x9f\x98\x80");
  EXPECT_EQ(utf8_prefix(std::string(100, '\x80'), 50).size(), 47u);  // not UTF-8: cut at most 3 bytes earlier
}

TEST(Utf8, OnlyTheBytesThatAreNotUtf8AreEscaped) {
  EXPECT_EQ(escape_invalid_utf8("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(escape_invalid_utf8("bad \xff byte"), "bad \\xFF byte");
  EXPECT_EQ(escape_invalid_utf8("\xc3\xa9\xc3"), "\xc3\xa9\\xC3");    // a sequence cut at the end
  EXPECT_EQ(escape_invalid_utf8("\xed\xa0\x80"), "\\xED\\xA0\\x80");  // a surrogate, byte by byte
}

// One U+FFFD for each maximal ill-formed subpart, as Python's bytes.decode("utf-8", "replace") gives (its output
// for each case written here).
TEST(Utf8, ControlCharactersAreShownNotObeyed) {
  const std::string name = "a\x1b[2J\rb\nc\td\x7f caf\xc3\xa9";
  EXPECT_EQ(escape_control_characters(name, false), "a\\x1B[2J\\x0Db\\x0Ac\\x09d\\x7F caf\xc3\xa9");
  EXPECT_EQ(escape_control_characters(name, true), "a\\x1B[2J\\x0Db\nc\td\\x7F caf\xc3\xa9");
}

// What starts a text is scanned for its first ill-formed byte and for characters of more than one byte; a
// character cut by the end of what was read is neither, where more follows.
TEST(Utf8, AScanTellsEightBitTextFromUtf8WithStrayBytes) {
  EXPECT_EQ(scan_utf8("plain", false).first_invalid, std::nullopt);
  EXPECT_FALSE(scan_utf8("plain", false).multibyte);
  const Utf8Scan latin1 = scan_utf8("caf\xe9", false);
  EXPECT_EQ(latin1.first_invalid, 3u);
  EXPECT_FALSE(latin1.multibyte);
  const Utf8Scan stray = scan_utf8("\xc3\xa9 \xff", false);
  EXPECT_EQ(stray.first_invalid, 3u);
  EXPECT_TRUE(stray.multibyte);
  EXPECT_EQ(scan_utf8("ab\xe2\x82", true).first_invalid, std::nullopt);  // cut: more follows
  EXPECT_EQ(scan_utf8("ab\xe2\x82", false).first_invalid, 2u);           // the end of the text
  EXPECT_EQ(scan_utf8("ab\xe2", true).first_invalid, std::nullopt);
  EXPECT_EQ(scan_utf8("ab\xe2\x41", true).first_invalid, 2u);  // not cut: a wrong byte follows
  EXPECT_EQ(scan_utf8("ab\x80", true).first_invalid, 2u);      // no lead byte
}

TEST(Utf8, EachMaximalIllFormedPartIsOneReplacementCharacter) {
  const std::string r = "\xef\xbf\xbd";
  EXPECT_EQ(replace_invalid_utf8("caf\xc3\xa9 \xf0\x9f\x99\x82"), "caf\xc3\xa9 \xf0\x9f\x99\x82");
  EXPECT_EQ(replace_invalid_utf8("a\xbb\x84"
                                 "b"),
            "a" + r + r + "b");                                // two stray continuation bytes
  EXPECT_EQ(replace_invalid_utf8("\xe4\xb8z"), r + "z");       // a lead and its fitting byte: one
  EXPECT_EQ(replace_invalid_utf8("\xed\xa0\x80"), r + r + r);  // a surrogate: A0 does not fit ED
  EXPECT_EQ(replace_invalid_utf8("\xf0\x9f\x99"), r);          // cut at the end: one
  EXPECT_EQ(replace_invalid_utf8("\xc0\xaf\xff"), r + r + r);  // overlong lead, invalid bytes
}

}  // namespace
}  // namespace loco
