// Data parallel training, the baseline (docs/algorithm-reference.md §8; PyTorch DDP, Li et al. 2020). libtorch has
// no DDP module, so this is loco's own reducer:
//
//     g ← mean_m g_m   every step, before clipping and the optimizer step
//
// Gradients are packed into buckets in reverse parameter order (gradient_buckets.h: 25 MiB, the
// first 1 MiB). A post-hook on each parameter's gradient accumulator counts it ready; when a bucket
// is complete it is all-reduced asynchronously at once — but only after every lower-numbered bucket,
// so all ranks launch the same collectives in the same order — and backward carries on meanwhile.
// after_backward() launches whatever is left, waits for all buckets (their results are already in
// the gradient buffers: the all-reduce works in place on the bucket's slice) and moves the emulated
// clock to when the last one would have finished. Micro-batches before the step's last (gradient
// accumulation) communicate nothing, like DDP's no_sync(). With ddp.overlap = false every bucket is
// launched after backward instead: the baseline of the overlap benchmark.
#pragma once

#include <memory>
#include <vector>

#include "loco/algo/gradient_buckets.h"
#include "loco/algo/link_timeline.h"
#include "loco/train/strategy.h"

namespace loco {

class DataParallel final : public Strategy {
 public:
  DataParallel(const DdpConfig& config, const ReplicaContext& context);
  ~DataParallel() override;

  std::string describe() const override;
  void attach(Llama& model, const FlatParameters& parameters) override;
  void before_backward(bool last) override;
  bool acts_during_backward() const override { return true; }  // bucket hooks launch the all-reduces
  bool synchronised_at(std::int64_t) const override { return true; }  // every step
  void after_backward() override;

 private:
  struct Hooks;
  void parameter_ready(std::size_t parameter);
  void launch_ready_buckets();
  void launch(std::size_t bucket);

  DdpConfig config_;
  ReplicaContext context_;
  LinkTimeline link_;
  std::vector<GradientBucket> buckets_;
  std::vector<torch::Tensor> bucket_gradients_;    // slice of the flat gradient buffer per bucket
  std::vector<std::size_t> bucket_of_parameter_;   // per slot
  std::vector<std::int64_t> pending_parameters_;   // per bucket: gradients still to come this step
  std::vector<comm::WorkHandle> launched_;
  std::size_t next_to_launch_ = 0;
  bool communicate_ = false;  // this backward is the step's last
  std::unique_ptr<Hooks> hooks_;
};

}  // namespace loco
