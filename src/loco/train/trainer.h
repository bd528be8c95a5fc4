// The training loop of `loco train` for one replica: data → model → AdamW with schedule and
// clipping, periodic evaluation, metrics, checkpoints and exact resume. The strategy of
// dist.algorithm hooks in around each inner step and talks to the other replicas through the group;
// the trainer receives it from a factory and does not know the algorithms (train/strategy.h).
//
// Trainer::run is a recipe of named phases over the trainer's state (trainer.cpp; the state in trainer_state.h,
// the stops in trainer_stops.cpp):
//   set_up → restore → announce → { train_step → log (+ evaluate) → save } per step → summarise
// Who takes part in the strategy's synchronisations, where the replica writes and which data it reads
// are its membership's (note "membership", train/membership.h): every replica of `group` in a static run
// (note "replica-directories", train/run_directory.h), an elastic member's quorums otherwise. Strategies
// reach the replica's whole state through ReplicaContext::replica (note "elastic-heal",
// train/replica_state.h).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "loco/comm/comm_stats.h"
#include "loco/config/run_config.h"
#include "loco/train/checkpoint.h"
#include "loco/train/evaluate.h"
#include "loco/train/strategy.h"

namespace loco {

struct TrainSummary {
  std::int64_t steps = 0;
  std::int64_t steps_trained = 0;  // by this process (an elastic member that healed to the last step: none)
  std::int64_t tokens = 0;
  double train_loss = 0;  // loss of the last step
  EvalResult eval;        // final evaluation
  double tokens_per_s = 0;
  double elapsed_s = 0;
  double sim_wall_s = 0;  // note "emulated-wall-clock"
  std::uint64_t bytes_sent = 0;
  std::filesystem::path last_checkpoint;
  int stopped_by = 0;  // the signal that stopped the run before its last step (note "graceful-stop"); 0: none
};

struct TrainOptions {
  RunConfig config;                                // resolved and validated
  std::optional<std::filesystem::path> resume_from;  // replica 0's checkpoint directory
  bool quiet = false;                              // no progress output (tests)
  comm::Group* group = nullptr;                    // the run's replicas; nullptr: a single replica
  // With dist.stages > 1 (docs/pipeline.md): this replica's stages, ranked by stage; this process trains
  // the part of the model its rank holds, and `group` is that stage's group across the replicas.
  comm::Group* pipeline = nullptr;
  StrategyFactory make_strategy = nullptr;         // empty: a single replica (dist.algorithm = "none")
  // Who takes part in synchronisations (an elastic member's QuorumMembership); nullptr: every replica of
  // `group` (FixedMembership). Must outlive the run.
  Membership* membership = nullptr;
  // Called after each optimizer step (once it is logged and saved) with the step count; may throw to end
  // the run (simulated churn: run/local_elastic_run.h).
  std::function<void(std::int64_t step)> after_step = {};
  // Called with each metrics line once it is written (an elastic member reports it to its coordinator's
  // dashboard: membership/member_client.h).
  std::function<void(const nlohmann::json& record)> on_metrics = {};
  // What the replica's groups counted so far, where they are not `group` (an elastic member's, one per
  // quorum): metrics.jsonl's bytes and communication time. Empty with `group` or for a single replica.
  std::function<comm::CommStats()> communication_stats = {};
  // The signal that asks the run to stop (0: none yet), read where the replicas meet (note "graceful-stop").
  // Empty: the run is not stopped that way. Every rank of a run must have it or none.
  std::function<int()> stop_requested = {};
};

class Trainer {
 public:
  explicit Trainer(TrainOptions options);
  ~Trainer();

  TrainSummary run();
  // Loss of every step run by this process (tests compare runs with these).
  const std::vector<double>& step_losses() const;

 private:
  struct State;
  struct StepResult;
  class Access;

  void set_up();
  void decide_capture();
  void restore();
  void agree_on_resume();
  void announce() const;
  StepResult train_step();
  int agreed_stop();
  std::pair<torch::Tensor, torch::Tensor> next_micro_batch();
  double forward_backward();
  void micro_batch(const torch::Tensor& inputs, const torch::Tensor& targets);
  double forward_backward_stage();
  void log(const StepResult& result);
  void evaluate_into(nlohmann::json& record);
  void save();
  // A stop that ended a wait for a quorum (StopRequested, `signal`), or a wait that ran out (kGaveUpWaiting): the
  // run stops after this step, said on stderr.
  void note_stop_while_waiting(int signal, const std::string& what);
  // Runs `synchronise` (a strategy's step where a member may wait for a quorum): true when a stop (StopRequested)
  // or a wait that ran out (GaveUpWaiting, note "gave-up-waiting") ended it, noted for the loop.
  bool ended_waiting(const std::function<void()>& synchronise);
  // Note "gave-up-waiting": the error that ends a member whose wait ran out, naming the checkpoint it wrote first.
  [[noreturn]] void give_up_waiting();
  TrainSummary summarise();
  // What a checkpoint of this replica holds now (save, and a heal's encode).
  std::pair<CheckpointState, CheckpointTensors> snapshot();
  // Takes the state a checkpoint or another member's snapshot holds (resume, and a heal's adopt).
  void apply(const LoadedCheckpoint& checkpoint);
  // A resume's apply, agreed: every replica and stage applied its part, or all of them stop.
  void apply_everywhere(const LoadedCheckpoint& checkpoint);

  std::unique_ptr<State> state_;
};

}  // namespace loco
