// Note "membership": who takes part in a strategy's synchronisations. A strategy is written once, against
// this interface, and serves static and elastic runs alike; what differs between the two is a property
// of the membership, never an `if` on the run's mode in the algorithm.
//
//   FixedMembership (train/fixed_membership.h)     every replica of the run, always: a synchronisation is
//                                                  one attempt with the whole group and always commits;
//                                                  nobody heals; a failed collective ends the run. Replica
//                                                  r reads every M-th window and writes OUT_DIR/replica_r.
//   QuorumMembership (elastic/quorum_membership.h)  whichever members the coordinator's quorum holds at
//                                                  each synchronisation: members behind are healed first,
//                                                  outer steps commit in two phases (a vote), an attempt
//                                                  that fails or is aborted is retried with the next
//                                                  quorum, and each quorum lays out the data of the round
//                                                  it starts (note "elastic-data").
//
// One synchronisation, as a strategy writes it:
//
//   membership.synchronise(step, {compared, alike, attempt})
//     attempt(who)       exchange with who.group; who.adopted: the ranks whose state was just replaced by a
//                        heal (their contribution is the donor's and counts 0); then, for an outer step,
//     commit(who, ...)   phase two: false when nothing may be applied (the attempt returns false and the
//                        membership tries again with the next participants);
//     round_begins(...)  after a completed synchronisation: the round of training that follows.
#pragma once

#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loco/io/safetensors.h"

namespace loco {

namespace comm {
class Group;
}
class ReplicaState;

// The members of one attempt at a synchronisation, as this replica sees them.
struct Participants {
  comm::Group* group = nullptr;  // collectives among them; this replica's rank in it
  std::int64_t step = 0;         // the step they synchronise at: this replica's, after any heal
  std::vector<int> adopted;      // ranks that adopted another's state during this attempt, ascending
  bool adopted_state = false;    // this replica is one of them
};

// How the round that follows a synchronisation begins (Membership::round_begins).
enum class RoundStart {
  fresh,    // a synchronisation completed (or the run starts): a new round
  again,    // the round begun last, laid out anew: nothing of it was read (members resumed from checkpoints
            // taken as it began)
  resumed,  // members resumed from checkpoints taken inside the round begun last
};

// The part of a run's data order a replica reads (data::BatchSampler): every `of`-th window from `rank`.
struct DataSlice {
  int rank = 0;
  int of = 1;
};

class Membership {
 public:
  virtual ~Membership() = default;

  // ---- For the trainer, while it sets the replica up.
  // The replica whose state heals replace and whose data rounds are laid out; before the first step.
  virtual void attach(ReplicaState& replica) {}
  // Where the replica writes its metrics and checkpoints in the run directory `out_dir`.
  virtual std::filesystem::path directory(const std::filesystem::path& out_dir) const = 0;
  virtual DataSlice data_slice() const = 0;
  // Checks that every replica reads the same tokenizer from `data_dir` (a collective where it applies).
  virtual void check_same_data(const std::filesystem::path& data_dir) {}

  // ---- For strategies.
  // Who takes part, for the strategy's description (e.g. "M=4", or "elastic member a#1").
  virtual std::string describe() const = 0;
  // This replica's number in the run, 0 … dist.replicas − 1, as dist.adversary names replicas: a fixed
  // membership's rank; the replica an elastic member plays (a thread's r, or rank R of loco launch
  // --elastic), or -1 when its launcher numbered none.
  virtual int replica() const = 0;
  // Whether an attempt may fail or be aborted and be retried with other members (note "membership"): a
  // strategy then computes outer steps on copies until they commit, weighs every contribution (a member
  // that healed counts 0), and a checkpoint keeps an exchange in flight as this replica's own
  // contribution, to be exchanged again on resume, rather than as its result.
  virtual bool may_abort() const = 0;

  // What a strategy asks of one synchronisation.
  struct Synchronisation {
    // This replica's tensors that the members who are alike compare, as a checkpoint names them (its
    // strategy state): asked anew at each attempt, as a heal replaces them.
    std::function<NamedTensors()> compared;
    // Whether up-to-date members must hold the same `compared` (DiLoCo's θ_g and b); NoLoCo's differ by design.
    bool alike = true;
    // One attempt: true when done, false to try again with the next participants.
    std::function<bool(const Participants&)> attempt;
  };

  // Before the first step, with the replica's state in place (a resume's included): a membership whose
  // members change joins the run here, with one synchronisation at the replica's step (who.step 0: the
  // run starts; a replica that joins late is healed to the others' step). A fixed one does nothing.
  virtual void begin(const Synchronisation& sync) {}
  // One synchronisation at the replica's step `step`, tried until an attempt returns true. A CommError in
  // an attempt (a member failed inside a collective) ends the run for a fixed membership; a quorum
  // membership gives the attempt up and tries again.
  virtual void synchronise(std::int64_t step, const Synchronisation& sync) = 0;

  // Phase two of an outer step that `who` exchanged: whether this replica may apply its candidate state.
  // `candidate`: the state every member that committed holds afterwards (hashed and voted on where the
  // membership votes); `rejected`: ranks of `who` whose contribution was left out (reported with the
  // vote); `share(group, root)`: called after a commit whose votes disagreed, for this replica to take
  // the candidate state of rank `root` (broadcasts). False: nothing may be applied (the attempt returns
  // false). An empty `candidate`: nothing to agree on (NoLoCo's replicas differ by design): the
  // synchronisation is counted as done, never refused.
  virtual bool commit(const Participants& who, const std::function<NamedTensors()>& candidate,
                      const std::vector<int>& rejected, const std::function<void(comm::Group&, int root)>& share) = 0;
  // An exchange with `who` that ran outside synchronise (in the background) failed with `error`. Fixed:
  // rethrows it. Quorum: logged and reported (the others learn at once); the caller tries again.
  virtual void failed(const Participants& who, const std::exception_ptr& error) = 0;
  // An exchange with the ranks `with` of who.group that has no second phase (NoLoCo's group mean) failed
  // with `error`: the round is skipped. Fixed: rethrows it. Quorum: logged as a skip and reported.
  virtual void skipped(const Participants& who, const std::vector<int>& with, const std::exception_ptr& error) = 0;
  // The synchronisation of the point `point` (the step it began at) is complete (committed, or begun when
  // its outer step comes later, or retried at who.step): the round of training that follows runs `steps`
  // steps from who.step, begun as `start` says.
  virtual void round_begins(const Participants& who, std::int64_t point, std::int64_t steps,
                            RoundStart start = RoundStart::fresh) {}
  // The last synchronisation point round_begins recorded (0: none); a replica that resumed or healed at or
  // before it has nothing to exchange there.
  virtual std::int64_t last_point() const = 0;
  // LOCO_FAULT=exchanging:... fires here (train/fault_injection.h), just before an exchange.
  virtual void before_exchange() {}

  // Fields of the membership for the next metrics line.
  virtual void add_log_fields(nlohmann::json& record) {}
  // The membership's own part of the strategy state (checkpoints, heals): the data rounds, for example.
  virtual void save_to(nlohmann::json& json) const {}
  virtual void load_from(const nlohmann::json& json, const SafetensorsContent& tensors) {}
};

}  // namespace loco
