// Private to the trainer (trainer.cpp, trainer_stops.cpp): the state one replica's training holds, the view
// strategies get of it, and a step's result. Only the trainer's own files include this header.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loco/data/batch_sampler.h"
#include "loco/data/token_dataset.h"
#include "loco/pipeline/stages/stage_runner.h"
#include "loco/train/checkpoint.h"
#include "loco/train/communication_totals.h"
#include "loco/train/cuda_graph.h"
#include "loco/train/divergence.h"
#include "loco/train/emulated_clock.h"
#include "loco/train/inner_optimizer.h"
#include "loco/train/membership.h"
#include "loco/train/metrics.h"
#include "loco/train/progress.h"
#include "loco/train/replica_state.h"
#include "loco/train/step_profiler.h"
#include "loco/train/stop_checks.h"
#include "loco/train/strategy.h"
#include "loco/train/trainer.h"
#include "loco/util/directory_lock.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/seconds_since.h"

namespace loco {

// Note "gave-up-waiting": State::stopped_waiting of a wait that ran out; signals are positive.
constexpr int kGaveUpWaiting = -1;

// Everything one replica's training holds, filled phase by phase.
struct Trainer::State {
  explicit State(TrainOptions given) : options(std::move(given)) {}
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  TrainOptions options;
  RunConfig& config = options.config;
  comm::Group* group = options.group;
  int rank = group ? group->rank() : 0;  // the replica's
  int stage = options.pipeline ? options.pipeline->rank() : 0;
  bool lead = rank == 0;                              // evaluates (every stage of replica 0 takes part)
  bool quiet = options.quiet || !lead || stage != 0;  // shows progress

  // set_up
  torch::Device device{torch::kCPU};
  bool bf16 = false;
  std::optional<data::TokenDataset> train_data, val_data;
  std::optional<LoadedCheckpoint> resumed;
  std::filesystem::path out_dir;
  bool made_out_dir = false;                  // set_up created out_dir (a refused run removes it again while empty)
  std::optional<DirectoryLock> out_dir_lock;  // this process writes out_dir (run_directory.h)
  Llama model{nullptr};
  std::optional<InnerOptimizer> optimizer;
  std::optional<data::BatchSampler> sampler;
  std::optional<EmulatedClock> clock;
  std::unique_ptr<ReplicaState> access;        // the strategy's and the membership's view of this replica
  std::unique_ptr<Membership> own_membership;  // a static run's (FixedMembership)
  Membership* membership = nullptr;            // options.membership, or own_membership
  std::unique_ptr<Strategy> strategy;
  std::unique_ptr<pipeline::StageRunner> stage_runner;  // with dist.stages > 1
  // Note "cuda-graphs": how the step is launched on CUDA, or why it is not captured (said at the start).
  std::string capture_decision;
  torch::Tensor step_loss;  // float64 on the device: the step's loss, summed over its micro-batches

  // restore: where the run stands (a resume starts from the checkpoint's position)
  std::int64_t step = 0, tokens = 0;
  std::optional<StopChecks> stop_checks;  // from this process's first step (note "graceful-stop")
  double elapsed_before = 0;              // wall time of the run before this process
  std::optional<CommunicationTotals> communication;
  std::optional<MetricsWriter> metrics;

  // this process's loop
  std::unique_ptr<StepProfiler> profiler;
  // Captured work (set up by decide_capture): its inputs are copied into static buffers, its outputs stay where
  // they are.
  std::optional<CudaGraph> micro_batch_graph, update_graph;
  torch::Tensor static_inputs, static_targets, grad_norm;
  std::optional<Progress> progress;
  SteadyClock::time_point start, interval_start;
  std::int64_t interval_tokens = 0, interval_steps = 0;
  std::vector<double> step_losses;
  std::int64_t saved_step = -1;  // of this process's last checkpoint
  // Note "graceful-stop": a stop signal that ended this member's wait for a quorum (StopRequested), or
  // kGaveUpWaiting for a wait that ran out (note "gave-up-waiting"), whose message is gave_up.
  int stopped_waiting = 0;
  std::string gave_up;
  TrainSummary summary;

  int replicas() const { return group ? group->size() : 1; }
  void say(const std::string& line) const {
    if (!quiet) loco::print_unchecked(stderr, "{}\n", line);
  }
  std::int64_t tokens_per_step() const { return config.global_batch() * config.data.seq_len; }  // all replicas
  // Before the loop starts (a heal while the strategy attaches) this process has trained for no time.
  double elapsed_s() const {
    return elapsed_before + (start == SteadyClock::time_point{} ? 0.0 : seconds_since(start));
  }
  bool last_step() const { return step == config.train.steps; }
  // `loco prepare --val-fraction 0` writes no validation split: such data train without evaluation.
  bool validates() const { return val_data->size() > 0; }
  bool evaluation_due() const {
    return lead && validates() && (last_step() || (config.train.eval_every > 0 && step % config.train.eval_every == 0));
  }
  bool log_due() const { return step % config.train.log_every == 0 || last_step() || evaluation_due(); }
  bool checkpoint_due() const {
    return last_step() || (config.train.checkpoint_every > 0 && step % config.train.checkpoint_every == 0);
  }
  // A stopped run's checkpoint holds its last step, unless this process has one of it already or trained no
  // step (its state is then the checkpoint it resumed, or the initial one).
  bool checkpoint_before_stopping() const { return saved_step != step && !step_losses.empty(); }
  // Where the checkpoints a resume names are: the run's train.out_dir (replica 0's and stage 0's, which
  // --resume takes), or an elastic member's own directory.
  std::filesystem::path resumable_dir() const {
    return config.dist.elastic ? membership->directory(config.train.out_dir)
                               : std::filesystem::path(config.train.out_dir);
  }
  // Where the run starts again after it stopped short here, and what to change after a divergence (divergence.h).
  std::string start_again_advice() const { return where_to_start_again(resumable_dir(), out_dir, options.resume_from); }
  std::string diverged_advice() const {
    return divergence_advice(config, resumable_dir(), out_dir, options.resume_from);
  }
};

// The replica's state as strategies see it (note "elastic-heal").
class Trainer::Access final : public ReplicaState {
 public:
  explicit Access(Trainer& trainer) : trainer_(trainer) {}
  std::string encode() override {
    const auto [state, tensors] = trainer_.snapshot();
    return encode_replica_snapshot(state, tensors);
  }
  void adopt(const std::string& encoded, const std::string& source) override {
    trainer_.apply(decode_replica_snapshot(encoded, source));
  }
  void seek_data(std::uint64_t window) override {
    data::BatchSampler& sampler = *trainer_.state_->sampler;
    const std::uint64_t per_epoch = sampler.windows_per_epoch();
    sampler.restore(data::SamplerState{window / per_epoch, window % per_epoch, sampler.state().order});
  }
  std::uint64_t data_window() const override {
    const data::BatchSampler& sampler = *trainer_.state_->sampler;
    return sampler.state().epoch * sampler.windows_per_epoch() + sampler.state().cursor;
  }
  std::int64_t step() const override { return trainer_.state_->step; }

 private:
  Trainer& trainer_;
};

struct Trainer::StepResult {
  bool taken = true;  // false: a stop ended the wait for its quorum before the update (note "graceful-stop")
  double loss = 0;
  double lr = 0;
  torch::Tensor grad_norm;  // on the device: read when the step is logged (note "device-step")
};

}  // namespace loco
