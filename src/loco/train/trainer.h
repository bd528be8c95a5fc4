// The training loop of `loco train`: data → model → AdamW with schedule and clipping, periodic
// evaluation, metrics, checkpoints and exact resume. A Strategy hooks in around each inner step.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "loco/config/run_config.h"
#include "loco/train/evaluate.h"
#include "loco/train/strategy.h"

namespace loco {

struct TrainSummary {
  std::int64_t steps = 0;
  std::int64_t tokens = 0;
  double train_loss = 0;  // loss of the last step
  EvalResult eval;        // final evaluation
  double tokens_per_s = 0;
  double elapsed_s = 0;
  std::filesystem::path last_checkpoint;
};

struct TrainOptions {
  RunConfig config;                                // resolved and validated
  std::optional<std::filesystem::path> resume_from;  // a checkpoint directory
  bool quiet = false;                              // no progress output (tests)
};

class Trainer {
 public:
  explicit Trainer(TrainOptions options, std::unique_ptr<Strategy> strategy = std::make_unique<SingleReplica>());
  ~Trainer();

  TrainSummary run();
  // Loss of every step run by this process (tests compare runs with these).
  const std::vector<double>& step_losses() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace loco
