// Fuzz target: the membership messages (membership/wire.h) as the coordinator and its members decode them.
// A request body goes through parse_message and every field a route of coordinator_server.cpp reads
// (reply() parses the body and reads the credentials and the sequence number before any MAC is checked, so
// a stranger reaches all of this); an answer goes through what member_client.cpp reads (quorum_reply,
// commit_reply, refusal_from). reply() catches MembershipError alone, so a decoder may refuse with nothing
// else; a reply it accepts must survive being written and read again unchanged.
#include <functional>
#include <initializer_list>

#include "fuzz/fuzz_support.h"
#include "loco/membership/wire.h"

namespace {

using loco::membership::field;
using loco::membership::MembershipError;
using nlohmann::json;

void refused_only_as_malformed(const std::function<void()>& decode) {
  try {
    decode();
  } catch (const MembershipError& e) {
    loco::fuzz::fuzz_require(e.refusal() == loco::membership::Refusal::malformed, "a decoder refuses as malformed");
  }
}

template <typename Reply>
void survives_a_round_trip(const json& message, Reply (*decode)(const json&)) {
  refused_only_as_malformed([&] {
    const json written = loco::membership::to_json(decode(message));
    loco::fuzz::fuzz_require(loco::membership::to_json(decode(written)) == written,
                             "an accepted reply reads back as it was written");
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string body = loco::fuzz::as_text(data, size);
  loco::membership::refusal_from(400, body);  // a member reads any refusal, whatever its body
  json message;
  try {
    message = loco::membership::parse_message(body);
  } catch (const MembershipError&) {
    return 0;
  }
  // The routes' fields: challenge and join (anyone), heartbeat, quorum, commit and leave (members).
  refused_only_as_malformed([&] { loco::membership::credentials(message); });
  for (const char* name : {"seq", "incarnation"}) refused_only_as_malformed([&] { field<std::uint64_t>(message, name); });
  for (const char* name : {"timestamp", "step", "quorum_id", "store_port"}) {
    refused_only_as_malformed([&] { field<std::int64_t>(message, name); });
  }
  for (const char* name : {"run_id", "name", "nonce", "mac", "hash", "reason", "member_id"}) {
    refused_only_as_malformed([&] { field<std::string>(message, name); });
  }
  for (const char* name : {"wait_s", "heartbeat_interval_s"}) refused_only_as_malformed([&] { field<double>(message, name); });
  for (const char* name : {"ok", "quorum_broken"}) refused_only_as_malformed([&] { field<bool>(message, name); });
  refused_only_as_malformed([&] { loco::membership::rejected_members(message); });
  // The members' side: the answers to a quorum request and to a vote.
  survives_a_round_trip(message, loco::membership::quorum_reply);
  survives_a_round_trip(message, loco::membership::commit_reply);
  return 0;
}
