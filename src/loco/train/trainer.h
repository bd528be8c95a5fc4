// The training loop of `loco train` for one replica: data → model → AdamW with schedule and
// clipping, periodic evaluation, metrics, checkpoints and exact resume. The strategy of
// dist.algorithm (src/loco/algo/) hooks in around each inner step and talks to the other replicas
// through the group.
//
// Note "replica-directories": replica 0 writes the run directory train.out_dir as a single run
// would (metrics.jsonl, config.toml, checkpoints/step_N); replica r > 0 writes the same files under
// OUT_DIR/replica_r/. Only replica 0 evaluates and shows progress. A resume names replica 0's
// checkpoint (OUT_DIR/checkpoints/step_N); replica r reads OUT_DIR/replica_r/checkpoints/step_N.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "loco/config/run_config.h"
#include "loco/train/evaluate.h"

namespace loco {

namespace comm {
class Group;
}

struct TrainSummary {
  std::int64_t steps = 0;
  std::int64_t tokens = 0;
  double train_loss = 0;  // loss of the last step
  EvalResult eval;        // final evaluation
  double tokens_per_s = 0;
  double elapsed_s = 0;
  double sim_wall_s = 0;  // note "emulated-wall-clock"
  std::uint64_t bytes_sent = 0;
  std::filesystem::path last_checkpoint;
};

struct TrainOptions {
  RunConfig config;                                // resolved and validated
  std::optional<std::filesystem::path> resume_from;  // replica 0's checkpoint directory
  bool quiet = false;                              // no progress output (tests)
  comm::Group* group = nullptr;                    // the run's replicas; nullptr: a single replica
};

// Where replica `rank` keeps its files (note "replica-directories").
std::filesystem::path replica_directory(const std::filesystem::path& out_dir, int rank);
// Replica `rank`'s counterpart of replica 0's checkpoint `checkpoint`.
std::filesystem::path replica_checkpoint(const std::filesystem::path& checkpoint, int rank);

class Trainer {
 public:
  explicit Trainer(TrainOptions options);
  ~Trainer();

  TrainSummary run();
  // Loss of every step run by this process (tests compare runs with these).
  const std::vector<double>& step_losses() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace loco
