// A membership message the coordinator refuses (docs/fault-tolerance.md "Refusals"): the kind decides
// what the member does next (rejoin, fix its configuration) and the HTTP status the server answers with.
#pragma once

#include "loco/util/error.h"

namespace loco::membership {

enum class Refusal {
  malformed,          // not JSON, a field missing or of the wrong type: 400
  wrong_run,          // another run's id: 403
  unknown_member,     // expired or never joined: rejoin as a new member: 410
  stale_incarnation,  // the coordinator restarted since this member joined: rejoin: 409
  stale_quorum,       // a vote for a quorum that is no longer the run's: ask for a quorum again: 409
  unavailable,        // no coordinator answered (client side only)
  unauthenticated,    // no proof of the run's secret, a wrong MAC or a replayed message: 401
  barred,             // a name removed from the run for its rejected contributions: 403
};

class MembershipError : public Error {
 public:
  MembershipError(Refusal refusal, const std::string& message) : Error(message), refusal_(refusal) {}
  Refusal refusal() const { return refusal_; }

 private:
  Refusal refusal_;
};

// Other members finished the run while this one was behind (QuorumReply::run_finished): nothing is left
// to synchronise with, and the run's final state is theirs. Not a failure of the run.
class RunFinished : public Error {
 public:
  using Error::Error;
};

}  // namespace loco::membership
