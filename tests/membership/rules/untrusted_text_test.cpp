// Text from the network on its way into the coordinator's log and status page (membership/untrusted_text.h).
#include "loco/membership/untrusted_text.h"

#include <gtest/gtest.h>

namespace loco::membership {
namespace {

TEST(UntrustedText, ALogLineCannotBeEndedOrColouredBySender) {
  EXPECT_EQ(loggable("run\nloco coordinator: commit q1 step 999"), "run\\x0aloco coordinator: commit q1 step 999");
  EXPECT_EQ(loggable("\x1b[31mred\r"), "\\x1b[31mred\\x0d");
  EXPECT_EQ(loggable("a\\x0a"), "a\\\\x0a");  // a sender cannot write what an escape looks like
  EXPECT_EQ(loggable("caf\xc3\xa9"), "caf\\xc3\\xa9");
  EXPECT_EQ(loggable("plain text: 1.5 s"), "plain text: 1.5 s");
}

TEST(UntrustedText, HtmlIsShownNotRun) {
  EXPECT_EQ(html_escaped("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
}

TEST(UntrustedText, NamesArePlain) {
  EXPECT_TRUE(plain_name("host-3.rank_0"));
  EXPECT_FALSE(plain_name(""));
  EXPECT_FALSE(plain_name(std::string(kMaxNameLength + 1, 'a')));
  EXPECT_TRUE(plain_name(std::string(kMaxNameLength, 'a')));
  EXPECT_FALSE(plain_name("a\nb"));
  EXPECT_FALSE(plain_name("a b"));
  EXPECT_FALSE(plain_name("<b>"));
}

}  // namespace
}  // namespace loco::membership
