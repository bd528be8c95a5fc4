// One stage of a pipeline replica (docs/pipeline.md): its part of the model, run over a step's micro-batches
// in the order of pipeline.schedule, with the hidden states going forward to the next stage and their
// gradients back to the previous one over the replica's pipeline group (ActivationLink).
//
//   stage 0:      tokens → embedding → its layers → send h
//   stage s:      receive h → its layers → send h'          (backward: receive dh', send dh)
//   stage S − 1:  receive h → its layers → norm → head → loss of the micro-batch / m
//
// Each micro-batch's loss is divided by the step's m micro-batches, as the trainer's single-process loop
// does, so the gradients each stage accumulates are the whole model's for its parameters: S stages train
// the model one process trains (to float tolerance: the sums run in another order). What makes the
// parts one model again is here too: tied embeddings (two copies, on the first and last stage) get the
// sum of both copies' gradients, the gradient norm for clipping is the whole model's, and every stage
// learns the step's loss from the last.
#pragma once

#include <torch/types.h>

#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "loco/comm/group.h"
#include "loco/config/run_config.h"
#include "loco/model/llama.h"
#include "loco/pipeline/partition.h"
#include "loco/pipeline/schedule.h"
#include "loco/pipeline/stages/activation_link.h"

namespace loco::pipeline {

// The part of the model stage `stage` of `split` holds.
ModelPart stage_part(const std::vector<StageLayers>& split, int stage);

class StageRunner {
 public:
  // `part` is this stage's (stage = pipeline.rank() of pipeline.size() stages). Compares the settings that
  // decide the stages' messages (model shape, sequence length, micro-batches, schedule, codec, partition,
  // evaluation) with every other stage's first: ConfigError naming the stages that differ.
  StageRunner(Llama part, comm::Group& pipeline, const RunConfig& config);

  int stage() const { return pipeline_.rank(); }
  int stages() const { return pipeline_.size(); }
  bool first() const { return stage() == 0; }
  bool last() const { return stage() == stages() - 1; }
  std::int64_t whole_model_parameters() const { return whole_parameters_; }  // the tied embedding once

  // A micro-batch's token ids and targets, (B, T) int64 on the model's device; every stage draws the same
  // ones, in order (only the first uses the ids, only the last the targets).
  using NextMicroBatch = std::function<std::pair<torch::Tensor, torch::Tensor>()>;

  // The forward and backward passes of `micro_batches` micro-batches in the schedule's order, gradients
  // accumulated into the part's parameters; before_backward(last) runs before each backward, `last` for
  // the step's final one. Returns the step's loss (the mean over micro-batches), on every stage.
  double train(int micro_batches, const NextMicroBatch& next, const std::function<void(bool)>& before_backward);
  // With tied embeddings: both copies' gradients become their sum (after any averaging across replicas).
  void sum_tied_gradients();
  // The whole model's squared gradient norm, from this stage's `own` (the tied copy on the last stage is
  // counted once): one all-reduce over the stages.
  double whole_squared_norm(double own);
  // The loss of one batch, forward only (evaluation), on every stage.
  double loss(const torch::Tensor& inputs, const torch::Tensor& targets);

  // pipeline_bubble (this stage's idle fraction of its last step) and activation_bytes (sent so far).
  void add_log_fields(nlohmann::json& record) const;
  // "stage 1 of 4: layers 3-5, 1.2M of the model's 4.9M parameters (18.3 MiB with gradients and AdamW's
  // moments), 1f1b schedule, activations in fp32": what this process holds, the point of the stages.
  std::string describe() const;

 private:
  struct InFlight {
    torch::Tensor input;   // received hidden states (requires grad); undefined on the first stage
    torch::Tensor output;  // sent hidden states, or the scaled loss on the last stage
  };

  void forward(int micro_batch, int micro_batches, const NextMicroBatch& next, std::vector<InFlight>& held,
               torch::Tensor& loss_sum);
  void backward(InFlight& held);
  void post_receives(int micro_batches);
  torch::Tensor hidden_like(const torch::Tensor& tokens) const;  // the shape of a stage's input
  double broadcast_from_last(double value);
  double sum_over_stages(double value);
  torch::Tensor tied_weight() const;
  std::int64_t tied_copy_parameters() const;  // the last stage's copy of a tied embedding: counted once

  Llama part_;
  comm::Group& pipeline_;
  Schedule schedule_;
  ActivationLink link_;
  bool tied_;
  bool bf16_;                          // train.autocast = "bf16": the forward passes under autocast, as the trainer's
  std::int64_t whole_parameters_ = 0;  // the whole model's, the tied embedding once
  std::int64_t micro_batch_size_, sequence_length_;  // a training micro-batch's hidden states: (B, T, C)
  std::deque<ActivationLink::Pending> activations_in_, gradients_in_;  // this step's posted receives
  double last_bubble_ = 0;
};

}  // namespace loco::pipeline
