// Who may take part in a run (src/loco/membership/authentication.h, run_secret.h), without a network: HMAC-
// SHA256 against RFC 4231, the join's challenge–response (a replayed, stale, misdated or forged answer is
// refused), the members' MACs and sequence numbers (replays refused, reordering within the window taken),
// the status token, and the run's secret file.
#include "loco/membership/authentication.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "loco/membership/membership_error.h"
#include "loco/membership/run_secret.h"
#include "support/test_support.h"

namespace loco::membership {
namespace {

const std::string kSecret = "a-run-secret-of-some-length";
constexpr double kWallNow = 1.8e9;  // Unix seconds

// RFC 4231, test cases 1 and 2.
TEST(Authentication, HmacSha256MatchesRfc4231) {
  EXPECT_EQ(hmac_sha256_hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_TRUE(same_mac("abc", "abc"));
  EXPECT_FALSE(same_mac("abc", "abd"));
  EXPECT_FALSE(same_mac("abc", "ab"));
  EXPECT_EQ(random_hex(16).size(), 32u);
  EXPECT_NE(random_hex(16), random_hex(16));
}

void expect_refused(const std::function<void()>& action, const std::string& why,
                    Refusal refusal = Refusal::unauthenticated) {
  try {
    action();
    ADD_FAILURE() << "accepted; expected a refusal saying: " << why;
  } catch (const MembershipError& e) {
    EXPECT_EQ(e.refusal(), refusal) << e.what();
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(Authentication, AJoinAnswersOneFreshChallengeWithTheSecret) {
  Authenticator coordinator(kSecret, "run", 7);
  const std::int64_t stamp = static_cast<std::int64_t>(kWallNow);
  const std::string nonce = coordinator.challenge(0);
  coordinator.admit("a", nonce, stamp, join_mac(kSecret, "run", "a", nonce, stamp), kWallNow, 1);
  // The same answer again (a replay): the nonce was used.
  expect_refused([&] { coordinator.admit("a", nonce, stamp, join_mac(kSecret, "run", "a", nonce, stamp), kWallNow, 2); },
                 "answers no challenge");
  expect_refused([&] { coordinator.admit("a", "feed", stamp, join_mac(kSecret, "run", "a", "feed", stamp), kWallNow, 2); },
                 "answers no challenge");
  // Another secret, another name or run than the MAC says, a stale challenge, a misdated answer.
  const auto answer = [&](const std::string& secret, const std::string& run, const std::string& mac_name,
                          const std::string& name, std::int64_t timestamp, double now) {
    const std::string n = coordinator.challenge(now - 1);
    coordinator.admit(name, n, timestamp, join_mac(secret, run, mac_name, n, timestamp), kWallNow, now);
  };
  expect_refused([&] { answer("another-secret-entirely", "run", "a", "a", stamp, 10); }, "does not prove the run's secret");
  expect_refused([&] { answer(kSecret, "run", "a", "b", stamp, 10); }, "does not prove the run's secret");
  expect_refused([&] { answer(kSecret, "other-run", "a", "a", stamp, 10); }, "does not prove the run's secret");
  expect_refused([&] {
    const std::string n = coordinator.challenge(100);
    coordinator.admit("a", n, stamp, join_mac(kSecret, "run", "a", n, stamp), kWallNow, 100 + kChallengeLifetimeS + 1);
  }, "issued 31 s ago");
  expect_refused([&] { answer(kSecret, "run", "a", "a", stamp - 301, 10); },
                 "a's clock is 301 s behind the coordinator's clock");
  expect_refused([&] { answer(kSecret, "run", "a|settings:00", "a|settings:00", stamp + 400, 11); },
                 "a's clock is 400 s ahead of the coordinator's clock (at most 300 s apart are allowed): synchronise");
  answer(kSecret, "run", "a", "a", stamp + 299, 10);  // within the allowed skew
}

TEST(Authentication, MessagesCarryTheSessionsMacAndUnseenSequenceNumbers) {
  Authenticator coordinator(kSecret, "run", 7);
  const std::string key = coordinator.open_session("a#1", "n0");
  EXPECT_EQ(key, session_key(kSecret, "a#1", 7, "n0"));  // what the member derives on its side
  EXPECT_NE(key, session_key(kSecret, "a#1", 8, "n0"));  // another incarnation, another key
  const auto send = [&](const std::string& body, std::uint64_t seq, const std::string& mac_key) {
    coordinator.check_request("a#1", "/v1/heartbeat", body, seq, request_mac(mac_key, "/v1/heartbeat", body));
  };
  send("{\"seq\":1}", 1, key);
  send("{\"seq\":3}", 3, key);
  send("{\"seq\":2}", 2, key);  // out of order: two threads of one member
  expect_refused([&] { send("{\"seq\":2}", 2, key); }, "repeats sequence number 2");
  expect_refused([&] { send("{\"seq\":0}", 0, key); }, "repeats sequence number 0");
  expect_refused([&] { send("{\"seq\":4}", 4, session_key("another-secret-entirely", "a#1", 7, "n0")); },
                 "holds no session with this coordinator that signs this message", Refusal::unknown_member);
  expect_refused([&] {  // the body changed after it was signed
    coordinator.check_request("a#1", "/v1/heartbeat", "{\"seq\":5,\"ok\":false}", 5,
                              request_mac(key, "/v1/heartbeat", "{\"seq\":5,\"ok\":true}"));
  }, "holds no session with this coordinator that signs this message", Refusal::unknown_member);
  expect_refused([&] {  // signed for another path
    coordinator.check_request("a#1", "/v1/leave", "{\"seq\":6}", 6, request_mac(key, "/v1/heartbeat", "{\"seq\":6}"));
  }, "holds no session with this coordinator that signs this message", Refusal::unknown_member);
  send("{\"seq\":1000}", 1000, key);
  expect_refused([&] { send("{\"seq\":700}", 700, key); }, "repeats sequence number 700");  // below the window
  send("{\"seq\":800}", 800, key);                                                       // within it, unseen
  // A seq far ahead is refused and moves nothing: it would otherwise lock the member out (2^64 - 1 did).
  expect_refused([&] { send("{\"seq\":18446744073709551615}", 18446744073709551615u, key); },
                 "jumps to sequence number 18446744073709551615");
  send("{\"seq\":1001}", 1001, key);
  expect_refused([&] {  // another member's session is not this one's
    coordinator.check_request("b#1", "/v1/heartbeat", "{\"seq\":1}", 1, request_mac(key, "/v1/heartbeat", "{\"seq\":1}"));
  }, "holds no session with this coordinator that signs this message", Refusal::unknown_member);
  coordinator.close_session("a#1");
  EXPECT_FALSE(coordinator.has_session("a#1"));
  expect_refused([&] { send("{\"seq\":1002}", 1002, key); }, "holds no session with this coordinator that signs this message", Refusal::unknown_member);
}

TEST(Authentication, TheStatusTokenComesFromTheSecret) {
  Authenticator coordinator(kSecret, "run", 7);
  EXPECT_TRUE(coordinator.status_token_ok(status_token(kSecret, "run")));
  EXPECT_FALSE(coordinator.status_token_ok(status_token(kSecret, "other-run")));
  EXPECT_FALSE(coordinator.status_token_ok(status_token("another-secret-entirely", "run")));
  EXPECT_FALSE(coordinator.status_token_ok(""));
}

TEST(RunSecret, AFileOnlyItsOwnerReadsHoldsTheSecret) {
  test::ScratchDir dir;
  const auto file = dir / "run.secret";
  const std::string secret = new_run_secret();
  EXPECT_EQ(secret.size(), 64u);
  create_secret_file(file, secret);
  struct stat info {};
  ASSERT_EQ(::stat(file.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(read_secret_file(file, "--secret-file"), secret);
  EXPECT_THROW(create_secret_file(file, new_run_secret()), IoError);  // never overwritten
  EXPECT_EQ(read_secret_file(file, "--secret-file"), secret);
  std::filesystem::permissions(file, std::filesystem::perms::group_read, std::filesystem::perm_options::add);
  try {
    read_secret_file(file, "--secret-file");
    ADD_FAILURE() << "read a secret others may read";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("chmod 600"), std::string::npos) << e.what();
  }
  const auto short_file = dir / "short.secret";
  test::write_text(short_file, "abc\n");
  std::filesystem::permissions(short_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_THROW(read_secret_file(short_file, "--secret-file"), ConfigError);
  EXPECT_THROW(read_secret_file(dir / "missing", "--secret-file"), ConfigError);
  // Another user's file, mode 600 (audit round 14: accepted, though its owner knows and may change the secret).
  // Only root can give a file away.
  if (::chown(file.c_str(), 65534, 65534) != 0) return;
  std::filesystem::permissions(file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  try {
    read_secret_file(file, "--secret-file");
    ADD_FAILURE() << "read a secret another user owns";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("which belongs to another user (uid 65534)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loco::membership
