#include "loco/membership/authentication.h"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cmath>
#include <vector>

#include "loco/membership/membership_error.h"
#include "loco/util/error.h"

namespace loco::membership {

namespace {

std::string hex(const unsigned char* bytes, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (std::size_t i = 0; i < size; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

std::string fields(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& part : parts) {
    if (!out.empty()) out += '\n';
    out += part;
  }
  return out;
}

MembershipError refused(const std::string& why) { return MembershipError(Refusal::unauthenticated, why); }

}  // namespace

std::string hmac_sha256_hex(const std::string& key, const std::string& message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
           message.size(), mac, &length) == nullptr) {
    throw InternalError("OpenSSL's HMAC-SHA256 failed");
  }
  return hex(mac, length);
}

bool same_mac(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> buffer(bytes);
  if (RAND_bytes(buffer.data(), static_cast<int>(bytes)) != 1) {
    throw InternalError("OpenSSL's random generator failed");
  }
  return hex(buffer.data(), bytes);
}

std::string join_mac(const std::string& secret, const std::string& run_id, const std::string& name,
                     const std::string& nonce, std::int64_t timestamp) {
  return hmac_sha256_hex(secret, fields({"loco-join", run_id, name, nonce, std::to_string(timestamp)}));
}

std::string session_key(const std::string& secret, const std::string& member_id, std::uint64_t incarnation,
                        const std::string& nonce) {
  return hmac_sha256_hex(secret, fields({"loco-session", member_id, std::to_string(incarnation), nonce}));
}

std::string request_mac(const std::string& key, const std::string& path, const std::string& body) {
  return hmac_sha256_hex(key, fields({"request", path, body}));
}

std::string reply_mac(const std::string& key, const std::string& path, std::uint64_t seq, int status,
                      const std::string& body) {
  return hmac_sha256_hex(key, fields({"reply", path, std::to_string(seq), std::to_string(status), body}));
}

std::string status_token(const std::string& secret, const std::string& run_id) {
  return hmac_sha256_hex(secret, fields({"loco-status", run_id}));
}

Authenticator::Authenticator(std::string secret, std::string run_id, std::uint64_t incarnation)
    : secret_(std::move(secret)),
      run_id_(std::move(run_id)),
      incarnation_(incarnation),
      unknown_member_key_(random_hex(32)) {}

std::string Authenticator::challenge(double now) {
  // Old challenges go first: a flood of requests for challenges holds at most a lifetime's worth.
  for (auto it = challenges_.begin(); it != challenges_.end();) {
    it = now - it->second > kChallengeLifetimeS ? challenges_.erase(it) : std::next(it);
  }
  std::string nonce = random_hex(32);
  challenges_[nonce] = now;
  return nonce;
}

void Authenticator::admit(const std::string& name, const std::string& nonce, std::int64_t timestamp,
                          const std::string& mac, double wall_now, double now) {
  // The name as the member gave it: what the join's MAC covers adds its settings' digest and its pipeline
  // place after a '|', which no member name holds (wire.h signed_join_name).
  const std::string member = name.substr(0, name.find('|'));
  const auto issued = challenges_.find(nonce);
  if (issued == challenges_.end()) {
    throw refused(
        fmt::format("{}'s join answers no challenge of this coordinator (used already, or never issued): "
                    "ask for a new one",
                    member));
  }
  const double age = now - issued->second;
  challenges_.erase(issued);  // once, whatever comes next
  if (age > kChallengeLifetimeS) {
    throw refused(fmt::format("{}'s join answers a challenge issued {:.0f} s ago (they last {:.0f} s)", member, age,
                              kChallengeLifetimeS));
  }
  if (const double skew = static_cast<double>(timestamp) - wall_now; std::abs(skew) > kClockSkewS) {
    throw refused(
        fmt::format("{}'s clock is {:.0f} s {} the coordinator's clock (at most {:.0f} s apart are "
                    "allowed): synchronise the clocks of both hosts (NTP: chrony, or `timedatectl "
                    "set-ntp true`), then start the member again",
                    member, std::abs(skew), skew > 0 ? "ahead of" : "behind", kClockSkewS));
  }
  if (!same_mac(mac, join_mac(secret_, run_id_, name, nonce, timestamp))) {
    throw refused(
        fmt::format("{}'s join does not prove the run's secret: give the member the coordinator's secret "
                    "(LOCO_RUN_SECRET_FILE or LOCO_RUN_SECRET)",
                    member));
  }
}

std::string Authenticator::open_session(const std::string& member_id, const std::string& nonce) {
  Session& session = sessions_[member_id];
  session = Session{session_key(secret_, member_id, incarnation_, nonce), 0, {}};
  return session.key;
}

void Authenticator::check_request(const std::string& member_id, const std::string& path, const std::string& body,
                                  std::uint64_t seq, const std::string& mac) {
  // Whoever cannot sign for a session learns nothing from the answer: an unknown id and a known one with a
  // wrong MAC get the same refusal, after the same work (a MAC under a key that matches nothing), so that
  // the members' names, which /status hides, cannot be enumerated (issue 35).
  const auto found = sessions_.find(member_id);
  const std::string& key = found != sessions_.end() ? found->second.key : unknown_member_key_;
  if (!same_mac(mac, request_mac(key, path, body)) || found == sessions_.end()) {
    throw MembershipError(Refusal::unknown_member,
                          fmt::format("{} holds no session with this coordinator that signs this message (it is not "
                                      "a member, left or expired, or the message lacks its session's MAC): join "
                                      "again",
                                      member_id));
  }
  Session& session = found->second;
  // A seq far ahead would move the window past every seq the member will send: it would be locked out.
  if (seq > session.highest && seq - session.highest > kSequenceLead) {
    throw refused(fmt::format("a request to {} for {} jumps to sequence number {}, more than {} past the last "
                              "({}); a member counts up by one per request",
                              path, member_id, seq, kSequenceLead, session.highest));
  }
  // Requests of one member may arrive out of order (its heartbeat thread and its training thread each have
  // a connection), so any unseen seq within the window is taken.
  const bool in_window = seq > session.highest || session.highest - seq < kReplayWindow;
  if (seq == 0 || !in_window || session.seen.count(seq) > 0) {
    throw refused(fmt::format("a request to {} for {} repeats sequence number {} (replayed)", path, member_id, seq));
  }
  session.highest = std::max(session.highest, seq);
  session.seen.insert(seq);
  if (session.highest >= kReplayWindow) {
    session.seen.erase(session.seen.begin(), session.seen.lower_bound(session.highest - kReplayWindow + 1));
  }
}

bool Authenticator::has_session(const std::string& member_id) const { return sessions_.count(member_id) > 0; }

const std::string& Authenticator::key_of(const std::string& member_id) const {
  const auto found = sessions_.find(member_id);
  LOCO_CHECK(found != sessions_.end(), "no session for {}", member_id);
  return found->second.key;
}

std::vector<std::string> Authenticator::members() const {
  std::vector<std::string> ids;
  for (const auto& [id, session] : sessions_) ids.push_back(id);
  return ids;
}

void Authenticator::close_session(const std::string& member_id) { sessions_.erase(member_id); }

bool Authenticator::status_token_ok(const std::string& token) const {
  return same_mac(token, status_token(secret_, run_id_));
}

}  // namespace loco::membership
