#include "loco/membership/coordinator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>

#include "loco/membership/membership_error.h"
#include "loco/membership/run_settings.h"
#include "loco/membership/untrusted_text.h"
#include "loco/util/error.h"
#include "loco/util/utf8.h"

namespace loco::membership {

namespace {

constexpr std::size_t kEventsKept = 200;
constexpr std::size_t kMaxReasonLength = 256;  // a leave's reason, as kept in the events

// A step is a count of optimizer steps: refused below 0 or above the run's steps (kMaxStep, which no run
// reaches, when they are unknown): a member that claimed 2^63 - 1 once marked the run finished there.
void require_step(std::int64_t step, const std::string& member_id, std::int64_t run_steps) {
  const std::int64_t last = run_steps > 0 ? std::min(run_steps, kMaxStep) : kMaxStep;
  if (step < 0 || step > last) {
    throw MembershipError(Refusal::malformed,
                          fmt::format("{} claims step {}, which no {} reaches (0 to {})", member_id, step,
                                      run_steps > 0 ? "member of this run" : "run", last));
  }
}

// A pipeline place a member may claim (note "pipeline-units").
void require_place(const PipelinePlace& place, const std::string& name) {
  if (place.stages < 1 || place.stages > kMaxStages || place.stage < 0 || place.stage >= place.stages) {
    throw MembershipError(Refusal::malformed, fmt::format("member '{}' claims stage {} of {} stages (1 to {} stages, "
                                                          "a stage below their number)",
                                                          name, place.stage, place.stages, kMaxStages));
  }
  if (place.stages > 1 && !plain_name(place.unit)) {
    throw MembershipError(Refusal::malformed, fmt::format("member '{}' names its pipeline replica '{}': 1 to {} "
                                                          "letters, digits, '.', '_' or '-'",
                                                          name, loggable(place.unit), kMaxNameLength));
  }
}

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options) : options_(std::move(options)) {
  if (!plain_name(options_.run_id)) {
    throw ConfigError(
        fmt::format("run id '{}' must be 1 to {} letters, digits, '.', '_' or '-' (it is part of log "
                    "lines, store keys and the status page): choose another --run-id or LOCO_RUN_ID",
                    options_.run_id.size() > 80
                        ? loggable(options_.run_id.substr(0, 64)) + fmt::format("…({} bytes)", options_.run_id.size())
                        : loggable(options_.run_id),
                    kMaxNameLength));
  }
}

void Coordinator::require_run(const std::string& run_id) const {
  if (run_id != options_.run_id) {
    throw MembershipError(Refusal::wrong_run, fmt::format("run id '{}' is not this coordinator's run; start the "
                                                          "replica with this run's LOCO_RUN_ID",
                                                          run_id));
  }
}

JoinReply Coordinator::join(const std::string& run_id, const std::string& name, double now, const PipelinePlace& place,
                            const nlohmann::json& settings) {
  require_run(run_id);
  const bool unit_barred = place.stages > 1 && barred_units_.count(place.unit) > 0;
  if (barred_names_.count(name) > 0 || unit_barred) {
    throw MembershipError(Refusal::barred, fmt::format("{} '{}' was removed from this run: its "
                                                       "pseudo-gradients held NaN or Inf in {} synchronisations. Fix "
                                                       "the replica and start it under another name",
                                                       unit_barred ? "pipeline replica" : "member name",
                                                       unit_barred ? place.unit : name, options_.max_rejections));
  }
  if (!plain_name(name)) {
    throw MembershipError(Refusal::malformed, fmt::format("member name '{}' must be 1 to 64 letters, digits, '.', "
                                                          "'_' or '-'",
                                                          name));
  }
  require_place(place, name);
  // Every name is remembered for the run (a restarted member's next id goes on from its last), so their number
  // is bounded: far more than any run's members and restarts, and what a member could make up runs out here.
  if (joins_by_name_.count(name) == 0 && joins_by_name_.size() >= kMaxMemberNames) {
    throw MembershipError(Refusal::malformed, fmt::format("this run has seen {} member names, the most a coordinator "
                                                          "keeps; start members under names it knows, or a new "
                                                          "coordinator",
                                                          kMaxMemberNames));
  }
  // A coordinator started again with another --steps than the members': they were refused later, each claiming
  // a step "which no member of this run reaches", which blamed the members for the coordinator's option.
  const nlohmann::json* steps = nullptr;
  if (const auto train = settings.find("train"); train != settings.end() && train->is_object()) {
    if (const auto found = train->find("steps"); found != train->end()) steps = &*found;
  }
  if (options_.run_steps > 0 && steps != nullptr && steps->is_number_integer() &&
      steps->get<std::int64_t>() != options_.run_steps) {
    throw MembershipError(Refusal::malformed,
                          fmt::format("member '{}' has train.steps = {}, but this coordinator was started with --steps "
                                      "{}: start the coordinator with --steps {} (or 0, to check no step), or give the "
                                      "members train.steps = {}",
                                      name, steps->get<std::int64_t>(), options_.run_steps, steps->get<std::int64_t>(),
                                      options_.run_steps));
  }
  if (!members_.empty()) {
    if (const auto difference = settings_difference(settings, settings_)) {
      throw MembershipError(Refusal::malformed,
                            fmt::format("member '{}' has {}: every member of a run must be given the same config (the "
                                        "same file and --set), but for where it reads, writes, logs and computes",
                                        name, *difference));
    }
  }
  settings_ = settings;               // the same as the members', or the first member's
  if (members_.empty()) stages_ = 0;  // the run's shape is its members': a mistaken first one does not stay
  if (stages_ != 0 && place.stages != stages_) {
    throw MembershipError(Refusal::malformed, fmt::format("member '{}' has {} stages, but this run's members have {}: "
                                                          "start every member with the same dist.stages",
                                                          name, place.stages, stages_));
  }
  stages_ = place.stages;
  if (place.stages > 1) {  // the stage's process was started again: its predecessor goes, and the replica breaks
    for (const auto& [held_by, m] : members_) {
      if (m.place.unit != place.unit || m.place.stage != place.stage) continue;
      const std::string id = held_by;  // a copy: removing the member erases its key
      const std::string detail =
          fmt::format("{} (stage {} of {}: a new member '{}' took its place)", id, place.stage, place.unit, name);
      if (m.last_heartbeat == m.joined_at && !m.waiting_since && !m.served) {
        // Never heard of since its join: a join whose answer was lost and is tried again. Its place is taken
        // without breaking the replica (the pipeline's keys stay those of the generation, whoever holds it).
        erase(id);
        record(now, "leave", detail);
      } else {
        remove(id, "leave", detail, now);
      }
      break;
    }
  }
  const std::string id = fmt::format("{}#{}", name, ++joins_by_name_[name]);
  Member& m = members_[id];
  m.name = name;
  m.place = place;
  m.joined_at = m.last_heartbeat = now;
  record(now, "join", place.stages > 1 ? fmt::format("{} (stage {} of {})", id, place.stage, place.unit) : id);
  return {id, options_.incarnation};
}

std::optional<PipelineReply> Coordinator::take_pipeline(const Credentials& who) const {
  require_member(who);
  const PipelinePlace& place = members_.at(who.member_id).place;
  if (place.stages <= 1) {
    throw MembershipError(Refusal::malformed, fmt::format("{} joined as a whole replica, not as a pipeline stage",
                                                          who.member_id));
  }
  PipelineReply reply;
  reply.members.resize(static_cast<std::size_t>(place.stages));
  for (const auto& [id, m] : members_) {
    if (m.place.unit == place.unit) reply.members[static_cast<std::size_t>(m.place.stage)] = id;
  }
  for (const std::string& id : reply.members) {
    if (id.empty()) return std::nullopt;
  }
  const auto generation = unit_generations_.find(place.unit);
  reply.store_prefix = fmt::format("loco/{}/pipeline/{}/g{}/", options_.incarnation, place.unit,
                                   generation == unit_generations_.end() ? 0 : generation->second);
  return reply;
}

std::vector<std::string> Coordinator::former_members(const std::vector<std::string>& ids) const {
  std::vector<std::string> gone;
  for (const std::string& id : ids) {
    if (members_.count(id) == 0) gone.push_back(id);
  }
  return gone;
}

void Coordinator::require_incarnation(const Credentials& who) const {
  if (who.incarnation != options_.incarnation) {
    throw MembershipError(Refusal::stale_incarnation,
                          fmt::format("member {} joined coordinator incarnation {}, this is incarnation {} (the "
                                      "coordinator restarted): rejoin as a new member",
                                      who.member_id, who.incarnation, options_.incarnation));
  }
}

void Coordinator::require_member(const Credentials& who) const {
  require_incarnation(who);
  const auto found = members_.find(who.member_id);
  if (found == members_.end()) {
    throw MembershipError(Refusal::unknown_member, fmt::format("member {} is not in the run (it left, or its "
                                                               "heartbeat expired): rejoin as a new member",
                                                               who.member_id));
  }
}

Coordinator::Member& Coordinator::member(const Credentials& who) {
  require_member(who);
  return members_.at(who.member_id);
}

HeartbeatReply Coordinator::heartbeat(const Credentials& who, double now, std::vector<monitor::MetricPoint> points) {
  Member& m = member(who);
  m.last_heartbeat = now;
  for (monitor::MetricPoint& point : points) {
    point.time_s = now;
    history_.add(m.name, point);
  }
  const bool superseded = m.quorum_id != 0 && m.quorum_id != quorum_.id;
  return {quorum_.id, superseded || (m.quorum_id == quorum_.id && quorum_broken_)};
}

void Coordinator::request_quorum(const Credentials& who, std::int64_t step, double now, std::int64_t received) {
  require_step(step, who.member_id, options_.run_steps);
  Member& m = member(who);
  m.last_heartbeat = now;
  m.step = step;
  if (m.waiting_since || m.served) return;
  // A member that asks at the step of the reply it was last given, without having received it (the answer
  // was lost on the way), gets it again while its quorum stands: the others are meeting in that quorum's
  // group, and would otherwise wait for it until their rendezvous times out. One that received it and asks
  // again (its exchange failed and its failure vote was lost too) waits for a new quorum.
  const bool lost = m.taken && m.taken->serial > received && m.taken->steps[m.taken->rank] == step;
  if (lost && m.quorum_id == quorum_.id && !quorum_broken_ && !renew_quorum_ && finished_step_ == 0) {
    m.served = m.taken;
    return;
  }
  m.waiting_since = now;
}

std::optional<QuorumReply> Coordinator::take_quorum(const Credentials& who) {
  Member& m = member(who);
  if (finished_step_ > 0 && (m.waiting_since || m.served)) {
    m.waiting_since.reset();
    m.served.reset();
    QuorumReply finished;
    finished.quorum_id = quorum_.id;
    finished.incarnation = options_.incarnation;
    finished.members = {who.member_id};
    finished.step = finished_step_;
    finished.steps = {m.step};
    finished.run_finished = true;
    return finished;
  }
  std::optional<QuorumReply> reply = std::move(m.served);
  m.served.reset();
  if (reply) m.taken = reply;
  return reply;
}

void Coordinator::leave(const Credentials& who, const std::string& reason, double now, bool finished) {
  const Member& m = member(who);
  std::string detail = fmt::format("{} ({})", who.member_id, utf8_prefix(reason, kMaxReasonLength));
  if (finished) {
    // Note "finish-claims": the run is finished at the claimant's step only where the run got to it (a quorum
    // formed there) and no other member is beyond it (their train.steps differ, or the claim is false);
    // otherwise every member would be told so and stop. Such a claim is a plain leave.
    // A member's step is the one it asked a quorum at, or its quorum's when that was further (it healed there).
    const auto step_of = [](const Member& member) {
      return std::max(member.step, member.taken ? member.taken->step : std::int64_t{0});
    };
    const std::int64_t claimed = step_of(m);
    std::string ahead;
    for (const auto& [id, other] : members_) {
      if (id != who.member_id && step_of(other) > claimed &&
          is_healthy({id, other.last_heartbeat, std::nullopt}, now, options_.rules)) {
        ahead = fmt::format("{} is at step {}", id, step_of(other));
        break;
      }
    }
    if (claimed > reached_step_) ahead = fmt::format("the run reached step {} only", reached_step_);
    if (ahead.empty()) {
      finished_step_ = std::max(finished_step_, claimed);
    } else {
      detail += fmt::format(
          "; it says it finished the run at step {}, but {}: not counted (do the members have the "
          "same train.steps?)",
          claimed, ahead);
      finished = false;
    }
  }
  remove(who.member_id, "leave", detail, now, finished);
}

void Coordinator::vote(const Credentials& who, std::int64_t quorum_id, std::int64_t step, bool ok,
                       const std::string& hash, double now, const std::vector<std::string>& rejected) {
  require_step(step, who.member_id, options_.run_steps);
  Member& m = member(who);
  m.last_heartbeat = now;
  const auto voted_in = [&](const Synchronisation& sync) {
    return std::any_of(sync.votes.begin(), sync.votes.end(), [&](const Vote& v) { return v.member == who.member_id; });
  };
  const auto found = synchronisations_.find({quorum_id, step});
  // A repeated vote only asks for the decision (take_decision), even when the run has moved on since.
  if (found != synchronisations_.end() && voted_in(found->second)) return;
  if (quorum_.id == 0 || quorum_id != quorum_.id || m.quorum_id != quorum_id) {  // 0: no quorum formed yet
    throw MembershipError(Refusal::stale_quorum,
                          fmt::format("{} voted for quorum {} at step {}, but the run's quorum is {}{}: ask for a "
                                      "quorum again",
                                      who.member_id, quorum_id, step, quorum_.id,
                                      m.quorum_id == quorum_.id ? "" : " and does not include it"));
  }
  // Note "bounded-votes": a member votes once per synchronisation and takes the decision before it trains on,
  // so it never has two undecided votes in a quorum; a vote that would open a second is refused, or one member
  // could open synchronisations without end (each kept while its quorum stands). The members it rejects
  // must be members of the quorum.
  decide_synchronisations(now);
  for (const auto& [key, other] : synchronisations_) {
    if (key.first == quorum_id && key.second != step && !other.decision && voted_in(other)) {
      throw MembershipError(Refusal::malformed,
                            fmt::format("{} voted for step {} while its vote for step {} is undecided: a member votes "
                                        "once per synchronisation and waits for its decision",
                                        who.member_id, step, key.second));
    }
  }
  for (const std::string& id : rejected) {
    const bool in_quorum = std::any_of(quorum_stages_.begin(), quorum_stages_.end(), [&](const auto& stage) {
      return std::find(stage.begin(), stage.end(), id) != stage.end();
    });
    if (!in_quorum) {
      throw MembershipError(Refusal::malformed, fmt::format("{}'s vote rejects '{}', which is no member of quorum {}",
                                                            who.member_id, utf8_prefix(id, 64), quorum_id));
    }
  }
  Synchronisation& sync = synchronisations_[{quorum_id, step}];
  if (sync.stages.empty()) sync.stages = quorum_stages_;
  // Rejections are reported by the members of the rejected one's stage: a majority of the replicas.
  const std::size_t replicas = sync.stages.front().size();
  if (!sync.decision) sync.votes.push_back({who.member_id, ok, ok ? hash : ""});
  // One member's word does not remove another: a rejection counts once a majority reported it.
  std::vector<std::string> removed;
  for (const std::string& id : rejected) {
    std::set<std::string>& reporters = sync.rejections[id];
    const bool counted = 2 * reporters.size() > replicas;
    reporters.insert(who.member_id);
    if (counted || 2 * reporters.size() <= replicas || members_.count(id) == 0) continue;
    if (options_.max_rejections > 0 && ++rejections_[id] >= options_.max_rejections) removed.push_back(id);
  }
  for (const std::string& id : removed) {
    if (members_.count(id) == 0) continue;  // gone with a stage of its pipeline replica
    barred_names_.insert(members_.at(id).name);
    if (members_.at(id).place.stages > 1) barred_units_.insert(members_.at(id).place.unit);  // all its stages
    remove(id, "expel", fmt::format("{} (its pseudo-gradients held NaN or Inf in {} synchronisations; its name is "
                                    "barred from the run)",
                                    id, rejections_[id]),
           now);
  }
}

std::optional<CommitReply> Coordinator::take_decision(const Credentials& who, std::int64_t quorum_id,
                                                      std::int64_t step) {
  member(who);
  const auto found = synchronisations_.find({quorum_id, step});
  if (found == synchronisations_.end() || !found->second.decision) return std::nullopt;
  const Synchronisation& sync = found->second;
  std::size_t stage = 0;  // the voter's: its stage's canonical hash
  while (stage + 1 < sync.stages.size() &&
         std::find(sync.stages[stage].begin(), sync.stages[stage].end(), who.member_id) == sync.stages[stage].end()) {
    ++stage;
  }
  const CommitDecision& d = (*sync.decision)[stage];
  return CommitReply{d.outcome, d.canonical_hash,
                     std::binary_search(d.outliers.begin(), d.outliers.end(), who.member_id), d.outliers, d.reason};
}

// A synchronisation of an earlier quorum can no longer commit: the run has moved on without it.
// Decisions are kept, not erased once taken: one failure vote decides an abort at once, and a member that
// votes after the voters took it (another pipeline stage, whose own exchange went well) must find that
// abort, as must a member whose answer was lost and that asks again; otherwise its vote opens a new
// synchronisation that nobody else votes in, and it waits until the quorum breaks. Each (quorum, step)
// is one synchronisation (an abort renews the quorum's id), so a kept decision never answers another.
// They go two quorums later, or beyond the kKeptDecisions newest of the current quorum: every member
// takes a step's decision before it trains the next, so an older one is never asked for.
void Coordinator::decide_synchronisations(double now) {
  constexpr std::size_t kKeptDecisions = 4;
  std::vector<SyncKey> expired;
  std::size_t decided_of_current = 0;
  for (auto it = synchronisations_.rbegin(); it != synchronisations_.rend(); ++it) {  // newest first
    const auto& [key, sync] = *it;
    if (key.first < quorum_.id - 1 || (key.first == quorum_.id && sync.decision && ++decided_of_current > kKeptDecisions)) {
      expired.push_back(key);
    }
  }
  for (const SyncKey& key : expired) synchronisations_.erase(key);
  for (auto& [key, sync] : synchronisations_) {
    if (sync.decision) continue;
    const bool current = key.first == quorum_.id;
    std::vector<CommitDecision> d =
        decide_commit_by_stage(sync.stages, sync.votes, !current || quorum_broken_, options_.rules.min_replicas);
    if (d.empty()) continue;  // no stages: no quorum stood behind the votes (refused in vote())
    const CommitDecision& first = d.front();  // the outcome and reason are every stage's
    if (first.outcome == Outcome::pending) continue;
    if (first.outcome == Outcome::commit) {
      std::vector<std::string> hashes, outliers;
      for (const CommitDecision& stage : d) {
        hashes.push_back(utf8_prefix(stage.canonical_hash, 16));
        outliers.insert(outliers.end(), stage.outliers.begin(), stage.outliers.end());
      }
      record(now, "commit", fmt::format("q{} step {}: hash {}{}", key.first, key.second, fmt::join(hashes, ", "),
                                        outliers.empty() ? "" : fmt::format(", to heal: {}", fmt::join(outliers, ", "))));
    } else {
      record(now, "abort", fmt::format("q{} step {}: {}", key.first, key.second, first.reason));
      renew_quorum_ = true;
    }
    sync.decision = std::move(d);
  }
}

void Coordinator::remove(const std::string& id, const std::string& kind, const std::string& detail, double now,
                         bool finished) {
  const PipelinePlace place = members_.at(id).place;
  erase(id);
  record(now, kind, detail);
  // Once the run is finished, a stage that goes (finished, or told so) breaks nothing: its replica's others
  // finish or are told so too.
  if (finished || finished_step_ > 0 || place.stages <= 1) return;
  // Note "pipeline-units": the replica's other stages cannot train without this one; they go, and the
  // replica's next members meet under a new generation's keys.
  ++unit_generations_[place.unit];
  std::vector<std::string> others;
  for (const auto& [other, m] : members_) {
    if (m.place.unit == place.unit) others.push_back(other);
  }
  for (const std::string& other : others) {
    const int stage = members_.at(other).place.stage;
    erase(other);
    record(now, "expel", fmt::format("{} (stage {} of {}, whose stage {} is gone: the replica starts again)", other,
                                     stage, place.unit, place.stage));
  }
}

void Coordinator::erase(const std::string& id) {
  members_.erase(id);
  for (const auto& stage : quorum_stages_) {
    if (std::find(stage.begin(), stage.end(), id) != stage.end()) quorum_broken_ = true;
  }
}

QuorumDecision Coordinator::decide(double now) const {
  std::vector<MemberState> counted = states();
  if (stages_ > 1) {
    std::vector<StageMember> parts;
    for (MemberState& state : counted) {
      const PipelinePlace& place = members_.at(state.id).place;
      parts.push_back({place.unit, place.stage, std::move(state)});
    }
    counted = pipeline_replicas(parts, stages_);
  }
  // Note "no-fresh-restart": once the run has got somewhere, members that all start from nothing would train
  // it again from step 0, silently (every member died, say, and was started again without --resume). They
  // form no quorum, whatever else they wait for, and are told why. Members that resumed from checkpoints bring
  // their step: the run goes on from the furthest, and the others heal from it.
  if (reached_step_ > 0) {
    std::size_t waiting = 0;
    bool progress_held = false;
    for (const MemberState& state : counted) {
      if (!is_healthy(state, now, options_.rules)) continue;
      progress_held = progress_held || state.step > 0;
      if (state.waiting_since) ++waiting;
    }
    if (waiting > 0 && !progress_held) {
      QuorumDecision held;
      held.waiting_for = fmt::format(
          "a member that holds the run's progress: the run reached step {} with this coordinator, but the {} "
          "waiting {} at step 0, started without a checkpoint. Start each with --resume and its latest "
          "checkpoint (OUT_DIR/members/NAME-n/checkpoints/step_N; docs/fault-tolerance.md \"Resuming a run from "
          "checkpoints\"), or start a new coordinator to train the run again from the start",
          reached_step_, waiting, waiting == 1 ? "replica is" : "replicas are");
      return held;
    }
  }
  QuorumDecision decision = decide_quorum(counted, quorum_, now, options_.rules);
  if (decision.form && quorum_.id == 0 && options_.start_members > 0) {
    std::size_t waiting = 0;
    for (const auto& stage : members_by_stage(decision.members)) waiting += stage.size();
    if (static_cast<int>(waiting) < options_.start_members) {
      decision.form = false;
      decision.members.clear();
      decision.waiting_for = fmt::format("{} of the {} member processes the run starts with", waiting,
                                         options_.start_members);
    }
  }
  return decision;
}

std::vector<std::vector<std::string>> Coordinator::members_by_stage(const std::vector<std::string>& units) const {
  if (stages_ <= 1) return {units};
  std::vector<std::vector<std::string>> stages(static_cast<std::size_t>(stages_),
                                               std::vector<std::string>(units.size()));
  for (const auto& [id, m] : members_) {
    const auto unit = std::lower_bound(units.begin(), units.end(), m.place.unit);
    if (unit == units.end() || *unit != m.place.unit) continue;
    stages[static_cast<std::size_t>(m.place.stage)][static_cast<std::size_t>(unit - units.begin())] = id;
  }
  return stages;
}

std::vector<MemberState> Coordinator::states() const {
  std::vector<MemberState> out;
  for (const auto& [id, m] : members_) out.push_back({id, m.last_heartbeat, m.waiting_since, m.step});
  return out;
}

double Coordinator::tick(double now) {
  const QuorumRules& rules = options_.rules;
  std::vector<std::string> silent;
  for (const auto& [id, m] : members_) {
    if (!is_healthy({id, m.last_heartbeat, std::nullopt}, now, rules)) silent.push_back(id);
  }
  for (const auto& id : silent) {
    if (members_.count(id) == 0) continue;  // gone with a stage of its pipeline replica
    remove(id, "expire", fmt::format("{} (no heartbeat for {:.1f} s)", id, now - members_.at(id).last_heartbeat), now);
  }
  decide_synchronisations(now);  // before a new quorum: votes of a broken one abort now
  const QuorumDecision decision = decide(now);
  if (decision.form && finished_step_ == 0) {  // once the run is finished, nothing is left to synchronise
    const std::int64_t before = quorum_.id;
    std::vector<std::vector<std::string>> stages = members_by_stage(decision.members);
    // A pipeline replica whose members changed keeps its name: its new members need a new group all the same.
    quorum_ = next_quorum(quorum_, decision.members, renew_quorum_ || stages != quorum_stages_);
    renew_quorum_ = false;
    if (quorum_.id != before) quorum_broken_ = false;
    quorum_stages_ = std::move(stages);
    std::int64_t step = 0;
    for (const auto& stage : quorum_stages_) {
      for (const auto& id : stage) step = std::max(step, members_.at(id).step);
    }
    reached_step_ = std::max(reached_step_, step);
    if (quorum_.id != before) {
      record(now, "quorum", fmt::format("q{} at step {}: {}", quorum_.id, step, fmt::join(quorum_.members, ", ")));
    } else {  // the same members again (every step for data parallel): counted, not news for the log
      ++event_counts_["quorum"];
    }
    for (std::size_t stage = 0; stage < quorum_stages_.size(); ++stage) {
      const std::vector<std::string>& ids = quorum_stages_[stage];
      std::vector<std::int64_t> steps;
      for (const auto& id : ids) steps.push_back(members_.at(id).step);
      // Each stage of the replicas meets in a group of its own.
      const std::string prefix = stages_ > 1 ? fmt::format("loco/{}/q{}/s{}/", options_.incarnation, quorum_.id, stage)
                                             : fmt::format("loco/{}/q{}/", options_.incarnation, quorum_.id);
      for (std::size_t rank = 0; rank < ids.size(); ++rank) {
        Member& m = members_.at(ids[rank]);
        m.waiting_since.reset();
        m.quorum_id = quorum_.id;
        m.served = QuorumReply{quorum_.id,  options_.incarnation, ids,   static_cast<int>(rank),
                               prefix,      step,                 steps, ++replies_formed_};
      }
    }
  }
  decide_synchronisations(now);  // after: votes of a quorum just superseded abort too
  double next = decision.decide_again_at.value_or(std::numeric_limits<double>::infinity());
  for (const auto& [id, m] : members_) next = std::min(next, m.last_heartbeat + rules.heartbeat_timeout_s);
  return next;
}

void Coordinator::excuse_stall(double now, double stalled_s) {
  for (auto& [id, m] : members_) m.last_heartbeat = std::min(now, m.last_heartbeat + stalled_s);
  record(now, "stall",
         fmt::format("the coordinator did not run for {:.1f} s: every member's heartbeat window starts again", stalled_s));
}

std::string Coordinator::waiting_for(double now) const {
  return decide(now).waiting_for;
}

void Coordinator::record(double now, std::string kind, std::string detail) {
  ++event_counts_[kind];
  if (options_.on_event) options_.on_event(kind, detail);
  events_.push_back({now, std::move(kind), std::move(detail)});
  if (events_.size() > kEventsKept) events_.pop_front();
}

nlohmann::json Coordinator::status(double now) const {
  const QuorumRules& rules = options_.rules;
  nlohmann::json members = nlohmann::json::array();
  for (const auto& [id, m] : members_) {
    const auto latest = history_.latest(m.name);
    members.push_back({{"id", id},
                       {"name", m.name},
                       {"pipeline", m.place.stages > 1 ? nlohmann::json{{"replica", m.place.unit}, {"stage", m.place.stage}}
                                                       : nlohmann::json()},
                       {"metrics", latest ? monitor::report_json(*latest) : nlohmann::json::object()},
                       {"healthy", is_healthy({id, m.last_heartbeat, std::nullopt}, now, rules)},
                       {"heartbeat_age_s", now - m.last_heartbeat},
                       {"waiting_s", m.waiting_since ? nlohmann::json(now - *m.waiting_since) : nlohmann::json()},
                       {"step", m.step},
                       {"quorum_id", m.quorum_id},
                       {"member_for_s", now - m.joined_at}});
  }
  // Names that reported metrics and are no member now (they left, expired or finished the run): the
  // dashboard shows their last point.
  std::set<std::string> current;
  for (const auto& [id, m] : members_) current.insert(m.name);
  nlohmann::json former = nlohmann::json::array();
  for (const std::string& name : history_.names()) {
    if (current.count(name) == 0) former.push_back({{"name", name}, {"metrics", monitor::report_json(*history_.latest(name))}});
  }
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : events_) events.push_back({{"time_s", e.time}, {"kind", e.kind}, {"detail", e.detail}});
  std::int64_t furthest = std::max(finished_step_, reached_step_);
  for (const auto& [id, m] : members_) furthest = std::max(furthest, m.step);
  return {{"run_id", options_.run_id},
          {"furthest_step", furthest},
          {"finished", finished_step_ > 0},
          {"incarnation", options_.incarnation},
          {"time_s", now},
          {"rules",
           {{"min_replicas", rules.min_replicas},
            {"start_replicas", rules.start_replicas},
            {"start_members", options_.start_members},
            {"heartbeat_timeout_s", rules.heartbeat_timeout_s},
            {"join_window_s", rules.join_window_s}}},
          {"quorum", {{"id", quorum_.id}, {"members", quorum_.members}, {"broken", quorum_broken_}}},
          {"waiting_for", waiting_for(now)},
          {"members", members},
          {"former_members", former},
          {"events", events}};
}

std::string Coordinator::metrics_text(double now) const {
  std::size_t healthy = 0, waiting = 0;
  for (const auto& [id, m] : members_) {
    healthy += is_healthy({id, m.last_heartbeat, std::nullopt}, now, options_.rules);
    waiting += m.waiting_since.has_value();
  }
  std::string out;
  out += "# HELP loco_members Members of the run known to the coordinator, by state.\n# TYPE loco_members gauge\n";
  out += fmt::format("loco_members{{state=\"joined\"}} {}\n", members_.size());
  out += fmt::format("loco_members{{state=\"healthy\"}} {}\n", healthy);
  out += fmt::format("loco_members{{state=\"waiting\"}} {}\n", waiting);
  out += "# HELP loco_quorum_id Id of the latest quorum.\n# TYPE loco_quorum_id gauge\n";
  out += fmt::format("loco_quorum_id {}\n", quorum_.id);
  out += "# HELP loco_quorum_size Members of the latest quorum.\n# TYPE loco_quorum_size gauge\n";
  out += fmt::format("loco_quorum_size {}\n", quorum_.members.size());
  out += "# HELP loco_quorum_broken 1 when a member of the latest quorum has left.\n# TYPE loco_quorum_broken gauge\n";
  out += fmt::format("loco_quorum_broken {}\n", quorum_broken_ ? 1 : 0);
  out += "# HELP loco_membership_events_total Membership events since the coordinator started.\n";
  out += "# TYPE loco_membership_events_total counter\n";
  for (const auto& [kind, count] : event_counts_) {
    out += fmt::format("loco_membership_events_total{{kind=\"{}\"}} {}\n", kind, count);
  }
  out += "# HELP loco_coordinator_incarnation Incarnation of this coordinator process.\n";
  out += "# TYPE loco_coordinator_incarnation gauge\n";
  out += fmt::format("loco_coordinator_incarnation {}\n", options_.incarnation);
  return out;
}

}  // namespace loco::membership
