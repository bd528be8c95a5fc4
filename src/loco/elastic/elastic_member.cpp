#include "loco/elastic/elastic_member.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <utility>

#include "loco/comm/comm_error.h"
#include "loco/elastic/state_digest.h"
#include "loco/elastic/state_transfer.h"
#include "loco/train/replica_state.h"
#include "loco/util/error.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/seconds_since.h"

namespace loco::elastic {

namespace {

constexpr double kFailureVoteWaitS = 5;

}  // namespace

ElasticMember::ElasticMember(ReplicaState& replica, QuorumGroup& groups, membership::MemberClient& member,
                             double vote_timeout_s, comm::Group* replica_stages)
    : replica_(replica),
      groups_(groups),
      member_(member),
      vote_timeout_s_(vote_timeout_s),
      fault_(FaultInjection::from_environment()),
      stages_(replica_stages ? std::make_unique<StageAgreement>(*replica_stages) : nullptr) {}

void ElasticMember::synchronise(const std::function<std::int64_t()>& reported,
                                const std::function<bool(comm::Group&, const membership::QuorumReply&)>& attempt) {
  torch::NoGradGuard no_grad;
  started_ = SteadyClock::now();
  membership::RetryPacing retries(vote_timeout_s_);
  last_failure_.clear();
  while (true) {
    // Note "retry-pacing" (membership/retry_rules.h).
    retries.give_up_if_exhausted(reported(), seconds_since(started_));
    std::this_thread::sleep_for(std::chrono::duration<double>(retries.pause_s()));
    std::optional<membership::QuorumReply> quorum;
    bool done = false;
    if (stages_) stages_->open_attempt();
    try {
      const auto asked = SteadyClock::now();
      comm::Group& group = groups_.join_quorum(reported());
      quorum = groups_.quorum();
      note_quorum(*quorum, seconds_since(asked));
      done = attempt(group, *quorum);
    } catch (const comm::CommError& e) {
      // A member failed or stopped during an exchange or a transfer: retry with the next quorum's group.
      give_up(quorum, reported(), e.what());
    }
    // Note "stage-agreement": an attempt that did not vote tells the replica's other stages how it ended here.
    // A CommError (they could not agree) ends the stage: its replica starts again.
    if (stages_) stages_->close_attempt(done);
    if (done) return;
    retries.failed(seconds_since(started_), std::exchange(last_failure_, {}));
  }
}

void ElasticMember::aborted(std::int64_t step, const std::string& reason) {
  loco::print_unchecked(stderr, "elastic: synchronisation at step {} aborted ({}); retrying with the next quorum\n",
                        step, reason);
  log_.add("abort", step, seconds_since(started_), reason);
  last_failure_ = "aborted: " + reason;
}

void ElasticMember::note_quorum(const membership::QuorumReply& quorum, double waited_s) {
  // A rejoin at a replacement coordinator may give the same id: the incarnation tells them apart.
  const membership::Credentials now = member_.credentials();
  if (credentials_ && (credentials_->member_id != now.member_id || credentials_->incarnation != now.incarnation)) {
    log_.add("rejoin", replica_.step(), 0,
             fmt::format("{} -> {}{}", credentials_->member_id, now.member_id,
                         credentials_->incarnation != now.incarnation ? " (a new coordinator)" : ""));
  }
  credentials_ = now;
  if (quorum.store_prefix == last_quorum_) return;
  last_quorum_ = quorum.store_prefix;
  const std::string members = fmt::format("{} members ({})", quorum.members.size(), fmt::join(quorum.members, ", "));
  loco::print_unchecked(stderr, "elastic: quorum q{} at step {}: {}\n", quorum.quorum_id, quorum.step, members);
  log_.set_quorum(quorum.quorum_id, quorum.members.size(), now.member_id);
  log_.add("quorum", replica_.step(), waited_s, fmt::format("q{}: {}", quorum.quorum_id, members));
}

HealOutcome ElasticMember::heal(comm::Group& group, const NamedTensors& compared, SnapshotSection section,
                                membership::ReplicasAlike alike, bool check_alike,
                                const std::vector<std::int64_t>& points) {
  const membership::QuorumReply& quorum = groups_.quorum();
  const auto& steps = quorum.steps;
  const bool in_step = std::all_of(steps.begin(), steps.end(), [&](std::int64_t s) { return s == quorum.step; }) &&
                       std::adjacent_find(points.begin(), points.end(), std::not_equal_to<>()) == points.end();
  if (in_step && !check_alike) return {};
  // Every member's digest (64 hex digits), in rank order.
  const std::string mine = state_digest(compared);
  const auto digest_length = static_cast<std::int64_t>(mine.size());
  torch::Tensor all = torch::empty({group.size() * digest_length}, torch::kUInt8);
  group.all_gather(torch::from_blob(const_cast<char*>(mine.data()), {digest_length}, torch::kUInt8).clone(), all);
  std::vector<std::string> digests;
  for (int r = 0; r < group.size(); ++r) {
    digests.emplace_back(reinterpret_cast<const char*>(all.data_ptr<std::uint8_t>()) + r * digest_length,
                         static_cast<std::size_t>(digest_length));
  }
  const membership::HealPlan plan = membership::plan_heal(steps, digests, alike, points);
  if (plan.receivers.empty()) return {};
  // Every member of the quorum reaches this point with the same plan (the digests were gathered), so the
  // transfers of a quorum are numbered alike everywhere: their subgroups' names.
  if (transfers_quorum_ != quorum.store_prefix) {
    transfers_quorum_ = quorum.store_prefix;
    transfers_ = 0;
  }
  const int transfer = ++transfers_;
  // The state goes from the donor to the receivers alone: the others go on (on a slow link the donor's
  // uplink carries it once per receiver, not once per member).
  std::vector<int> involved = plan.receivers;
  involved.insert(std::upper_bound(involved.begin(), involved.end(), plan.donor), plan.donor);
  const bool receiving = std::binary_search(plan.receivers.begin(), plan.receivers.end(), group.rank());
  if (!receiving && group.rank() != plan.donor) return {plan.receivers, false};
  const bool everyone = static_cast<int>(involved.size()) == group.size();
  comm::Group& transfer_group = everyone ? group : groups_.subgroup(involved, fmt::format("transfer-{}", transfer));
  const int root = static_cast<int>(std::find(involved.begin(), involved.end(), plan.donor) - involved.begin());
  const std::string sender = quorum.members[static_cast<std::size_t>(plan.donor)];
  const auto started = SteadyClock::now();
  std::string state;
  StateTransferOptions options;
  if (group.rank() == plan.donor) {
    state = replica_.encode();
    options.before_sending = [this](std::int64_t chunk, torch::Tensor& outgoing) {
      if (chunk == 0 && fault_ && fault_->at(FaultMoment::donating)) outgoing.data_ptr<std::uint8_t>()[0] ^= 0xff;
    };
  }
  if (receiving && fault_) fault_->at(FaultMoment::receiving);
  transfer_state(transfer_group, state, root, sender, options);
  if (!receiving) return {plan.receivers, false};
  // The bytes arrived intact; whether they hold the canonical state is checked before anything of them
  // is applied (a donor that is wrong, or lies).
  std::string digest;
  try {
    const LoadedCheckpoint received = decode_replica_snapshot(state, "member " + sender);
    const SafetensorsContent& part = section == SnapshotSection::model ? received.model : received.strategy;
    NamedTensors theirs;
    for (const auto& [name, tensor] : compared) theirs.emplace_back(name, part.at(name));
    digest = state_digest(theirs);
  } catch (const CheckpointError& e) {  // intact bytes that are not a state: the donor's fault, not this member's
    throw comm::CommError(fmt::format("the state from {} cannot be read ({}); it is not applied", sender, e.what()));
  }
  if (digest != plan.canonical_hash) {
    throw comm::CommError(fmt::format("the state from {} holds a state whose SHA-256 is {}, not the canonical {}; "
                                      "it is not applied",
                                      sender, digest.substr(0, 16), plan.canonical_hash.substr(0, 16)));
  }
  const std::int64_t was = replica_.step();
  try {
    replica_.adopt(state, "member " + sender);
  } catch (const CheckpointError& e) {  // well-formed, canonical where compared, yet refused (a non-finite moment)
    throw comm::CommError(fmt::format("the state from {} cannot be applied ({}); this member heals again at the next "
                                      "synchronisation",
                                      sender, e.what()));
  }
  const std::string detail = fmt::format("from {}, {:.1f} MB, step {} -> {}", sender, state.size() / 1e6, was,
                                         replica_.step());
  loco::print_unchecked(stderr, "elastic: healed {}\n", detail);
  log_.add("heal", replica_.step(), seconds_since(started), detail);
  return {plan.receivers, true};
}

std::optional<membership::CommitReply> ElasticMember::vote(std::int64_t quorum_id, std::int64_t step,
                                                          const std::string& hash,
                                                          const std::vector<std::string>& rejected) {
  std::optional<membership::CommitReply> decision = decision_for(quorum_id, step, hash, rejected);
  if (!stages_) return decision;
  // Note "stage-agreement": nothing is applied unless every stage of the replica commits.
  const bool commits = decision && decision->outcome == membership::Outcome::commit;
  if (stages_->settle(commits ? AttemptEnd::done : AttemptEnd::retry) == AttemptEnd::done || !commits) return decision;
  membership::CommitReply retried;
  retried.outcome = membership::Outcome::abort;
  retried.reason = fmt::format("stage(s) {} of this pipeline replica did not commit it; its stages retry together",
                               stages_->retrying());
  return retried;
}

std::optional<membership::CommitReply> ElasticMember::decision_for(std::int64_t quorum_id, std::int64_t step,
                                                                   const std::string& hash,
                                                                   const std::vector<std::string>& rejected) {
  try {
    return member_.vote(quorum_id, step, true, hash, vote_timeout_s_, rejected);
  } catch (const membership::MembershipError& e) {
    switch (e.refusal()) {
      case membership::Refusal::stale_incarnation:
        // Note "presumed-commit": the coordinator was replaced before its decision reached this member.
        // This member's exchange succeeded, so every member whose exchange succeeded holds the same
        // candidate; the decision could only have been to commit it, or an abort because a member failed,
        // whose members retry and are healed (they are behind) at the next synchronisation. The hash vote
        // there finds any member that differs. A pipeline stage's presumption yields to an abort that another
        // stage of its replica read (note "stage-agreement", vote()).
        loco::print_unchecked(stderr,
                              "elastic: the coordinator was replaced before deciding the synchronisation at step {}; "
                              "presumed committed (checked by the next synchronisation's vote)\n",
                              step);
        log_.add("presumed_commit", step, 0, e.what());
        return membership::CommitReply{membership::Outcome::commit, hash, false, {}, ""};
      case membership::Refusal::unknown_member:
      case membership::Refusal::stale_quorum:
        // This member was expired or expelled (its quorum broke), or the quorum was superseded: nothing
        // was committed with this vote.
        return retry_uncommitted(step, "vote refused", e.what());
      case membership::Refusal::unavailable:
        // No decision came within the vote's timeout (the coordinator gone, or silent). This member applies
        // nothing and retries with the next quorum, whose wait gives up in turn, with a checkpoint first (note
        // "gave-up-waiting"), while the coordinator stays away (before: the error ended the member, and its
        // steps since the last checkpoint were lost). Had the others committed, this member is behind them at
        // the next synchronisation and adopts their state, as after any abort.
        return retry_uncommitted(step, "no decision", e.what());
      default:
        throw;
    }
  }
}

std::nullopt_t ElasticMember::retry_uncommitted(std::int64_t step, const std::string& why, const std::string& detail) {
  loco::print_unchecked(stderr,
                        "elastic: {} for the synchronisation at step {} ({}); nothing applied, retrying with the next "
                        "quorum\n",
                        why, step, detail);
  log_.add("abort", step, 0, detail);
  last_failure_ = fmt::format("{}: {}", why, detail);
  groups_.abandon();
  return std::nullopt;
}

void ElasticMember::give_up(const std::optional<membership::QuorumReply>& quorum, std::int64_t step,
                            const std::string& why) {
  loco::print_unchecked(stderr, "elastic: synchronisation at step {} failed ({}); retrying with the next quorum\n",
                        step, why);
  log_.add("abort", step, seconds_since(started_), why);
  last_failure_ = why;
  report_failure(quorum, step);
  // Outside synchronise (an overlapped exchange), the replica's other stages learn it here; inside, as the
  // attempt ends.
  if (stages_ && !stages_->attempt_open()) stages_->settle(AttemptEnd::retry);
}

void ElasticMember::skip(const std::optional<membership::QuorumReply>& quorum, std::int64_t step,
                         const std::string& partners, const std::string& why) {
  loco::print_unchecked(stderr,
                        "elastic: averaging with {} at step {} failed ({}); skipped, paired again at the next "
                        "synchronisation\n",
                        partners, step, why);
  log_.add("skip", step, seconds_since(started_), why);
  report_failure(quorum, step);
}

void ElasticMember::report_failure(const std::optional<membership::QuorumReply>& quorum, std::int64_t step) {
  if (quorum) {
    try {
      // The vote is what aborts the synchronisation for the others; this member retries whatever the
      // decision, so it waits for it only briefly (a decision that does not come must not hold it for the
      // whole vote timeout while the others form quorums without it).
      member_.vote(quorum->quorum_id, step, false, "", std::min(vote_timeout_s_, kFailureVoteWaitS));
    } catch (const membership::MembershipError&) {
    }
  }
  groups_.abandon();
}

void ElasticMember::before_exchange() {
  if (fault_) fault_->at(FaultMoment::exchanging);
}

}  // namespace loco::elastic
