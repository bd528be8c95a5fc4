// Note "stage-agreement" (docs/pipeline.md "Churn"): the stages of a pipeline replica are members of their
// own, each voting on its stage's outer step, yet they must end every attempt at a synchronisation alike. A
// stage that applies an outer step its sibling retries leaves the replica in two synchronisations at once,
// and neither goes on: the sibling waits for a quorum, which the coordinator forms only when every stage
// of the replica waits; the other waits for the sibling's activations; both time out and the replica starts
// again. The coordinator decides once for every stage, so the stages agree by themselves, except when it is
// replaced before each of them read its decision: those that did not presume a commit (note
// "presumed-commit", elastic_member.cpp) while those that read an abort retry. So every attempt ends with
// the replica's stages gathering how it ended for each, over their pipeline group, before anything is
// applied:
//
//   each stage    done: it read a commit or presumed one, or its attempt needed no vote
//                 retry: it read an abort, its vote was refused, its exchange or heal failed, or its attempt
//                 asked for another quorum (a heal)
//   the replica   done when every stage is done; otherwise a stage that voted commit applies nothing and
//                 retries with the others
//
// An attempt inside ElasticMember::synchronise settles once: in its vote when it votes, else as it ends (it
// then keeps its own end: an attempt that needed no vote has laid out its data round, which a retry would
// lay out a second time). An outer step finished outside it (Streaming's overlapped exchange) settles in its
// vote or its failure.
// Settlements are numbered; stages whose numbers differ are out of step, a CommError that ends the stage
// (its replica starts again), as does a stage that stops answering (the group's timeout, comm.timeout_s).
// NoLoCo has no second phase and agrees on nothing: a stage's round is its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loco::comm {
class Group;
}

namespace loco::elastic {

enum class AttemptEnd : std::uint8_t { done = 0, retry = 1 };

// The replica's end of an attempt from its stages' (in stage order): done when every stage is done.
AttemptEnd replica_end(const std::vector<AttemptEnd>& stages);

class StageAgreement {
 public:
  // `stages`: the replica's pipeline group (rank: the stage), which outlives this.
  explicit StageAgreement(comm::Group& stages);

  // An attempt inside a synchronisation begins; it settles at most once.
  void open_attempt();
  bool attempt_open() const { return open_; }
  // This stage's attempt ended `mine`: the replica's end, once every stage said how its attempt ended. Inside
  // an open attempt that settled already, the same answer again. CommError when a stage is out of step or the
  // group failed; every later call throws it again.
  AttemptEnd settle(AttemptEnd mine);
  // The open attempt ends, this stage's `done` or not: settles it if nothing did (so that every stage settles
  // as often), and closes it. CommError as settle's.
  void close_attempt(bool done);
  // The stages that retried at the last settlement, for the log ("1, 2").
  const std::string& retrying() const { return retrying_; }

 private:
  comm::Group& stages_;
  std::int64_t settlements_ = 0;
  bool open_ = false;
  std::optional<AttemptEnd> settled_;  // of the open attempt
  std::string retrying_;
  std::optional<std::string> broken_;  // why the stages can no longer agree
};

}  // namespace loco::elastic
