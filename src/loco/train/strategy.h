// How replicas cooperate (docs/design.md §3 "Strategy"). The trainer owns the inner loop and calls the
// strategy around every inner step; a strategy decides when and what to exchange and owns any
// outer state (global parameters, momentum buffers), which it serialises into checkpoints.
//
//   attach(model, parameters)                       once, before a resume's load_state
//   for each step:
//     for each micro-batch: before_backward(last?) → forward/backward
//     after_backward → clip → AdamW → after_step(step)
//
// The strategies live in src/loco/algo/ (one file each); the trainer does not know them: it receives
// a StrategyFactory (algo/make_strategy.h builds one from the config, in cli/cmd_train.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>

#include "loco/config/run_config.h"
#include "loco/io/safetensors.h"
#include "loco/model/llama.h"
#include "loco/train/flat_parameters.h"

namespace loco {

namespace comm {
class Group;
}
class EmulatedClock;
class Membership;
class ReplicaState;

// What a strategy needs to know about the replica it serves.
struct ReplicaContext {
  comm::Group* group = nullptr;       // all replicas of a static run; nullptr for a single replica or an
                                      // elastic member (whose groups are its quorums')
  EmulatedClock* clock = nullptr;     // this replica's (note "emulated-wall-clock")
  std::int64_t total_steps = 0;       // the run's last step (strategies sync there)
  std::uint64_t seed = 0;             // train.seed, for seeded choices (left-out replicas, pairs)
  std::int64_t tokens_per_step = 0;   // tokens this replica trains on per inner step
  ReplicaState* replica = nullptr;    // the replica's whole state (note "elastic-heal"); set by the trainer
  Membership* membership = nullptr;   // who takes part in synchronisations (note "membership"); set by the trainer
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  // The exact form used, for logs and metrics (e.g. "diloco: nesterov(pytorch) eta=0.7 mu=0.9 H=100").
  virtual std::string describe() const = 0;
  // The model's parameters are flat (note "flat-parameters") and hold the initial weights.
  virtual void attach(Llama& model, const FlatParameters& parameters) {}
  // Once, before the first step, when the replica's state is in place (a resume's included): strategies
  // whose membership changes join their first quorum here, so that a resumed member reports the
  // checkpoint's step.
  virtual void begin() {}
  // A micro-batch's backward is next; `last` when it is the step's last (data parallel waits for it).
  virtual void before_backward(bool last) {}
  // Whether the strategy runs host code during backward (autograd hooks): such a backward cannot be
  // captured in a CUDA graph (note "cuda-graphs"), where hooks would run once, at capture.
  virtual bool acts_during_backward() const { return false; }
  // Gradients of the whole step are in place; data parallel averages them here (elastic data parallel
  // may also replace the replica's state here, step included: the trainer reads the step afterwards).
  virtual void after_backward() {}
  // The inner optimizer has stepped (`step` steps done); DiLoCo-style strategies sync here.
  virtual void after_step(std::int64_t step) {}
  // Whether every replica synchronised with others after `step` (asked once after_step(step) returned): the
  // replicas reach that step together, so the trainer can agree on a stop there without holding any of them
  // up (note "graceful-stop"). The same answer on every replica of a static run.
  virtual bool synchronised_at(std::int64_t step) const { return false; }
  // Whether an exchange of this strategy still runs on the group in the background after the step just
  // done (Streaming DiLoCo's overlapped fragments): the trainer's stop agreement between synchronisations
  // (train.stop_check_every) skips such a step, where its collective could reach the group before the
  // exchange's on one replica and after it on another. The same answer on every replica of a static run.
  virtual bool exchanging() const { return false; }
  // Waits until no exchange of this strategy runs on the group in the background (their results are still
  // applied when due, as before): the trainer's stop agreement may then use the group at a step with exchanges
  // in flight, where the replicas would otherwise never meet (note "graceful-stop").
  virtual void settle_exchanges() {}
  // Runs `evaluate` with the parameters a user would deploy in the model (DiLoCo: the global ones)
  // and restores the replica's own afterwards.
  virtual void with_evaluation_parameters(const std::function<void()>& evaluate) { evaluate(); }

  // Fields of its own for the next metrics line (an elastic member's: its membership's).
  virtual void add_log_fields(nlohmann::json& record) {}

  // Outer state for checkpoints: tensors and scalars; restored before training continues.
  virtual NamedTensors state_tensors() const { return {}; }
  virtual nlohmann::json state_json() const { return nlohmann::json::object(); }
  virtual void load_state(const SafetensorsContent& tensors, const nlohmann::json& json) {}
  // The part of a saved state_json (one load_state accepted) that every replica of a run holds alike: its
  // synchronisation schedule. A resume compares it across the replicas, whose parts of one checkpoint
  // would otherwise meet at other collectives (or wait for each other until comm.timeout_s) when they
  // disagree: one was edited, or copied from another step or run.
  virtual nlohmann::json schedule_of(const nlohmann::json& saved) const { return nlohmann::json::object(); }
};

// One replica, no communication: plain training.
class SingleReplica final : public Strategy {
 public:
  std::string describe() const override { return "single replica (no communication)"; }
};

// Builds the strategy a resolved config asks for, for one replica. ConfigError when it cannot run
// there.
using StrategyFactory = std::function<std::unique_ptr<Strategy>(const RunConfig&, const ReplicaContext&)>;

}  // namespace loco
