// Who may take part in a run (docs/security.md): the holders of the run's secret (run_secret.h). The secret
// never crosses the wire; what does is HMAC-SHA256 over what is said (OpenSSL's libcrypto):
//
//   join       member → POST /v1/challenge; the coordinator answers a fresh nonce, good once and for
//              kChallengeLifetimeS. member → POST /v1/join {run_id, name, nonce, timestamp, mac} with
//              mac = HMAC(secret, "loco-join" | run_id | name | nonce | timestamp); refused when the nonce is
//              unknown, used or old, the timestamp is off the coordinator's clock by more than kClockSkewS,
//              or the mac is wrong. Both sides then hold the session key
//              K = HMAC(secret, "loco-session" | member_id | incarnation | nonce), and the join's answer
//              carries the coordinator's mac under K: the member knows it talks to a holder of the secret.
//   messages   every later request of a member carries a sequence number `seq` in its body and the header
//              X-Loco-Mac = HMAC(K, "request" | path | body); a seq seen before, older than the last
//              kReplayWindow or more than kSequenceLead ahead, is refused (a replayed heartbeat or vote
//              changes nothing). Answers to them carry X-Loco-Mac = HMAC(K, "reply" | path | seq | status | body).
//   status     GET /status and / show the members only with X-Loco-Token (or ?token=) =
//              HMAC(secret, "loco-status" | run_id); without it, aggregate numbers.
//
// ("|" joins fields with a newline.) Pure logic with an injected clock, tested without a network.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace loco::membership {

inline constexpr double kChallengeLifetimeS = 30;  // a nonce answers one join within this
inline constexpr double kClockSkewS = 300;         // a join's timestamp may be this far off the coordinator's
inline constexpr std::uint64_t kReplayWindow = 256;  // sequence numbers of one member kept against replays
// How far past the highest accepted seq a request may jump: a member's requests that got no answer still
// count up (2^20: a day of unanswered heartbeats), while a seq near 2^64 would lock the member out.
inline constexpr std::uint64_t kSequenceLead = std::uint64_t{1} << 20;
inline constexpr const char* kMacHeader = "X-Loco-Mac";
inline constexpr const char* kStatusTokenHeader = "X-Loco-Token";

// HMAC-SHA256 of `message` under `key`, 64 lower-case hex characters.
std::string hmac_sha256_hex(const std::string& key, const std::string& message);
// Equal, in time that does not depend on where they differ.
bool same_mac(const std::string& a, const std::string& b);
// `bytes` random bytes from OpenSSL's generator, as hex.
std::string random_hex(std::size_t bytes);

// The protocol's MACs and keys, computed alike on both sides.
std::string join_mac(const std::string& secret, const std::string& run_id, const std::string& name,
                     const std::string& nonce, std::int64_t timestamp);
std::string session_key(const std::string& secret, const std::string& member_id, std::uint64_t incarnation,
                        const std::string& nonce);
std::string request_mac(const std::string& key, const std::string& path, const std::string& body);
std::string reply_mac(const std::string& key, const std::string& path, std::uint64_t seq, int status,
                      const std::string& body);
std::string status_token(const std::string& secret, const std::string& run_id);

// The coordinator's side: challenges issued, the members' session keys and their replay windows.
// MembershipError(unauthenticated) for every check that fails, with what was wrong.
class Authenticator {
 public:
  Authenticator(std::string secret, std::string run_id, std::uint64_t incarnation);

  // A fresh nonce for one join.
  std::string challenge(double now);
  // Checks a join's answer to the challenge `nonce` (and uses the nonce up); `wall_now` is the
  // coordinator's Unix time, `now` its steady clock. Returns nothing: a refusal throws.
  void admit(const std::string& name, const std::string& nonce, std::int64_t timestamp, const std::string& mac,
             double wall_now, double now);
  // After the join was accepted: member `member_id` holds the session key of `nonce`; returns it.
  std::string open_session(const std::string& member_id, const std::string& nonce);
  // A request of a member with a session: its MAC over `path` and `body`, and its `seq` unseen and at most
  // kSequenceLead past the highest. MembershipError(unknown_member), the same for every id, when no session
  // of `member_id` signs it; (unauthenticated) for a replayed or far-ahead seq.
  void check_request(const std::string& member_id, const std::string& path, const std::string& body,
                     std::uint64_t seq, const std::string& mac);
  bool has_session(const std::string& member_id) const;
  // The members that hold a session.
  std::vector<std::string> members() const;
  const std::string& key_of(const std::string& member_id) const;
  void close_session(const std::string& member_id);
  bool status_token_ok(const std::string& token) const;

 private:
  struct Session {
    std::string key;
    std::uint64_t highest = 0;    // the highest seq accepted
    std::set<std::uint64_t> seen;  // the seqs accepted within the window below it
  };

  std::string secret_;
  std::string run_id_;
  std::uint64_t incarnation_;
  std::map<std::string, double> challenges_;  // nonce → when it was issued
  std::map<std::string, Session> sessions_;   // by member id
  std::string unknown_member_key_;            // what a request for an id without a session is checked under
};

}  // namespace loco::membership
