// DiLoCo (ALGORITHMS.md §1, §2, §3) and Local SGD (§6) — one strategy, two configurations.
//
// Every replica runs H inner steps of AdamW on its own data, then all replicas synchronise:
//
//     Δ_m   = θ_g − θ_m                         pseudo_gradient()    (old global minus new local)
//     Δ     = Σ_m w_m·Δ_m / Σ_m w_m              replica_mean()       (w_m = 1; tokens with
//                                                                    diloco.weighted; 0 when dropped)
//     b     ← μ·b + Δ                           OuterNesterov::step  (PyTorch Nesterov, b starts at 0)
//     θ_g   ← θ_g − η·(Δ + μ·b)
//     θ_m   ← θ_g   on every replica            (AdamW's state is kept, never reset or averaged)
//
// Special cases of the same code: Local SGD (Diloco::local_sgd) is η = 1, μ = 0 (θ_g becomes the
// replicas' average), optionally with the Quadratic Synchronisation Rule choosing H (sync_schedule.h);
// M = 1 is a Lookahead-style optimiser. θ_g and b live on the host. A replica left out of a sync
// (drop_rate) still continues from θ_g. The run's last step always syncs. The exchange waits on the
// emulated link through LinkTimeline (note "emulated-wall-clock").
#pragma once

#include <memory>
#include <optional>

#include "loco/algo/link_timeline.h"
#include "loco/algo/outer_nesterov.h"
#include "loco/algo/parameter_fragment.h"
#include "loco/algo/sync_schedule.h"
#include "loco/comm/codecs/codec.h"
#include "loco/train/strategy.h"

namespace loco {

// Local SGD's outer step as DiLoCo's: η = 1, μ = 0, unweighted, nothing dropped.
DilocoConfig local_sgd_as_diloco(const LocalsgdConfig& config);

class Diloco final : public Strategy {
 public:
  // DiLoCo with its section's η, μ, weighting and drop rate, syncing on `schedule`.
  Diloco(const DilocoConfig& config, const ExchangeConfig& exchange, SyncSchedule schedule,
         const ReplicaContext& context);
  // Local SGD: η = 1, μ = 0, fixed H or the QSR over the inner schedule `optim`.
  static std::unique_ptr<Diloco> local_sgd(const LocalsgdConfig& config, const OptimConfig& optim,
                                           const ExchangeConfig& exchange, const ReplicaContext& context);

  std::string describe() const override;
  void attach(Llama& model, const FlatParameters& parameters) override;
  void after_step(std::int64_t step) override;
  void with_evaluation_parameters(const std::function<void()>& evaluate) override;
  NamedTensors state_tensors() const override;
  nlohmann::json state_json() const override;
  void load_state(const SafetensorsContent& tensors, const nlohmann::json& json) override;

 private:
  Diloco(std::string name, const DilocoConfig& config, const ExchangeConfig& exchange, SyncSchedule schedule,
         const ReplicaContext& context);
  void sync(std::int64_t step);
  // Whether this replica's Δ is left out of outer step `outer_step` (seeded, same on a rerun).
  bool dropped(std::int64_t outer_step) const;

  std::string name_;  // "diloco" or "localsgd", for logs
  DilocoConfig config_;
  ExchangeConfig exchange_;
  SyncSchedule schedule_;
  ReplicaContext context_;
  LinkTimeline link_;
  std::unique_ptr<comm::Codec> codec_;
  std::optional<ParameterFragment> parameters_;
  std::optional<OuterNesterov> outer_;
  std::int64_t outer_steps_ = 0;
  std::int64_t tokens_since_sync_ = 0;
};

}  // namespace loco
