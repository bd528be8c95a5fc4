#include "loco/pipeline/stages/stage_runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "loco/util/error.h"
#include "loco/util/seconds_since.h"
#include "loco/util/torch_compat.h"

namespace loco::pipeline {

namespace {

// What every stage must share for their messages to match: the shapes of the hidden states, how many
// micro-batches a step has and in which order, how they are encoded, which layers each holds, and when
// the stages evaluate together.
std::string message_settings(const RunConfig& c, int stages) {
  const ModelConfig& m = c.model;
  return fmt::format(
      "model {} {} {} {} {} {} {} | seq_len {} | micro_batch {} of {} | steps {} | schedule {} | "
      "codec {} {} | stages {} partition {} | eval {} {} {}",
      m.vocab_size, m.hidden_size, m.intermediate_size, m.num_hidden_layers, m.num_attention_heads,
      m.num_key_value_heads, m.tie_word_embeddings, c.data.seq_len, c.train.micro_batch_size, c.replica_batch(),
      c.train.steps, c.pipeline.schedule, c.pipeline.codec, c.comm.block_size, stages, c.pipeline.partition,
      c.train.eval_every, c.train.eval_batches, c.train.batch_size);
}

}  // namespace

ModelPart stage_part(const std::vector<StageLayers>& split, int stage) {
  const StageLayers& layers = split.at(static_cast<std::size_t>(stage));
  return {layers.first, layers.first + layers.count, stage == 0, stage + 1 == static_cast<int>(split.size())};
}

StageRunner::StageRunner(Llama part, comm::Group& pipeline, const RunConfig& config)
    : part_(std::move(part)),
      pipeline_(pipeline),
      schedule_(parse_schedule(config.pipeline.schedule)),
      link_(pipeline, config.pipeline.codec, config.comm.block_size),
      tied_(config.model.tie_word_embeddings && pipeline.size() > 1),
      bf16_(config.train.autocast == "bf16"),
      micro_batch_size_(config.train.micro_batch_size),
      sequence_length_(config.data.seq_len) {
  const std::string settings = message_settings(config, stages());
  const auto differing = pipeline_.ranks_differing_from_rank_0(std::string_view(settings));
  if (!differing.empty()) {
    throw ConfigError(fmt::format(
        "the stages of a pipeline replica were given different configs: stage(s) {} differ from stage 0 in what "
        "decides their messages (the [model] shape, data.seq_len, train.micro_batch_size, train.batch_size, "
        "train.steps, pipeline.schedule, pipeline.codec, comm.block_size, pipeline.partition or the evaluation "
        "settings; this stage has {}). Give every stage the same config",
        fmt::join(differing, ", "), settings));
  }
  whole_parameters_ =
      static_cast<std::int64_t>(sum_over_stages(static_cast<double>(part_->num_parameters() - tied_copy_parameters())));
}

std::int64_t StageRunner::tied_copy_parameters() const { return tied_ && last() ? tied_weight().numel() : 0; }

std::string StageRunner::describe() const {
  const ModelPart& p = part_->part();
  const std::int64_t held = part_->num_parameters();
  const double bytes = static_cast<double>(held) * part_->parameters().front().element_size() * 4;
  return fmt::format(
      "stage {} of {}: layers {}-{}{}{}, {} of the model's {} parameters ({:.1f} MiB with gradients and "
      "AdamW's moments), {} schedule, activations in {}",
      stage(), stages(), p.first_layer, p.end_layer - 1, p.takes_tokens ? " + embedding" : "",
      p.gives_logits ? " + norm and head" : "", held, whole_parameters_, bytes / (1 << 20), schedule_name(schedule_),
      link_.codec_name());
}

torch::Tensor StageRunner::hidden_like(const torch::Tensor& tokens) const {
  const torch::Tensor weight = part_->parameters().front();  // a copy: parameters() is a temporary
  return torch::empty({tokens.size(0), tokens.size(1), part_->config().hidden_size}, weight.options());
}

void StageRunner::forward(int micro_batch, int micro_batches, const NextMicroBatch& next, std::vector<InFlight>& held,
                          torch::Tensor& loss_sum) {
  auto [tokens, targets] = next();
  InFlight& f = held[static_cast<std::size_t>(micro_batch)];
  torch::Tensor input = tokens;
  if (!first()) {
    f.input = link_.take(activations_in_.front()).requires_grad_();
    activations_in_.pop_front();
    input = f.input;
  }
  compat::CudaBf16Autocast autocast(bf16_);
  if (last()) {
    f.output = part_->loss(input, targets) / static_cast<double>(micro_batches);
    // Summed on the device and read once, after the step (note "device-step", train/trainer.cpp): the
    // same float64 sum, without a wait per micro-batch.
    const torch::Tensor loss = f.output.detach().to(torch::kFloat64);
    loss_sum = loss_sum.defined() ? loss_sum + loss : loss;
  } else {
    f.output = part_->forward(input);
    link_.send(f.output, stage() + 1, Message::activation);
  }
}

void StageRunner::backward(InFlight& f) {
  if (last()) {
    f.output.backward();
  } else {
    f.output.backward(link_.take(gradients_in_.front()));
    gradients_in_.pop_front();
  }
  if (!first()) link_.send(f.input.grad(), stage() - 1, Message::gradient);
  f = {};  // the micro-batch's activations are freed here, which is what 1F1B saves
}

double StageRunner::train(int micro_batches, const NextMicroBatch& next,
                          const std::function<void(bool)>& before_backward) {
  const auto started = SteadyClock::now();
  const double waited_before = link_.receive_wait_s();
  std::vector<InFlight> held(static_cast<std::size_t>(micro_batches));
  const std::vector<Action> actions = stage_actions(schedule_, stages(), stage(), micro_batches);
  post_receives(micro_batches);
  torch::Tensor loss_sum;  // the last stage's, on its device
  int backwards = 0;
  for (const Action& action : actions) {
    if (action.pass == Pass::forward) {
      forward(action.micro_batch, micro_batches, next, held, loss_sum);
    } else {
      before_backward(++backwards == micro_batches);
      backward(held[static_cast<std::size_t>(action.micro_batch)]);
    }
  }
  link_.wait_for_sends();
  const double step_s = seconds_since(started);
  last_bubble_ = step_s > 0 ? (link_.receive_wait_s() - waited_before) / step_s : 0;
  return broadcast_from_last(last() ? loss_sum.item<double>() : 0.0);
}

// Every receive of the step, posted before its first pass (ActivationLink::Pending): the hidden states of
// the micro-batches in order, and their gradients in the order the next stage runs its backwards, which
// every schedule makes this stage's order too (tests/unit/pipeline_plan_test.cpp).
void StageRunner::post_receives(int micro_batches) {
  const torch::TensorOptions options = part_->parameters().front().options();
  const std::vector<std::int64_t> shape = {micro_batch_size_, sequence_length_, part_->config().hidden_size};
  for (int j = 0; j < micro_batches; ++j) {
    if (!first()) activations_in_.push_back(link_.post_receive(shape, options, stage() - 1, Message::activation));
    if (!last()) gradients_in_.push_back(link_.post_receive(shape, options, stage() + 1, Message::gradient));
  }
}

torch::Tensor StageRunner::tied_weight() const { return part_->model->embed_tokens->weight; }

void StageRunner::sum_tied_gradients() {
  if (!tied_ || (!first() && !last())) return;
  torch::NoGradGuard no_grad;
  torch::Tensor grad = tied_weight().grad();
  const int other = first() ? stages() - 1 : 0;
  // Exact, whatever pipeline.codec: the copies must stay equal. Both ends add the same two tensors,
  // which floating-point addition does in either order to the same bits.
  const torch::Tensor mine = grad.to(pipeline_.device(), /*non_blocking=*/false, /*copy=*/true).contiguous();
  torch::Tensor theirs = torch::empty_like(mine);
  const auto sent = pipeline_.send_async(mine, other, static_cast<int>(Message::tied_gradient));
  pipeline_.recv(theirs, other, static_cast<int>(Message::tied_gradient));
  sent->wait();
  grad.add_(theirs.to(grad.device()));
}

double StageRunner::whole_squared_norm(double own) {
  if (tied_copy_parameters() > 0) {
    torch::NoGradGuard no_grad;
    own -= tied_weight().grad().to(torch::kFloat64).pow(2).sum().item<double>();
  }
  return sum_over_stages(own);
}

double StageRunner::sum_over_stages(double value) {
  torch::Tensor total = torch::tensor({value}, torch::TensorOptions(torch::kFloat64).device(pipeline_.device()));
  pipeline_.all_reduce(total);
  return total.item<double>();
}

double StageRunner::loss(const torch::Tensor& inputs, const torch::Tensor& targets) {
  torch::NoGradGuard no_grad;
  torch::Tensor input = first() ? inputs : link_.receive(hidden_like(inputs), stage() - 1, Message::activation);
  double value = 0;
  {
    compat::CudaBf16Autocast autocast(bf16_);
    if (last()) {
      value = part_->loss(input, targets).item<double>();
    } else {
      link_.send(part_->forward(input), stage() + 1, Message::activation);
    }
  }
  link_.wait_for_sends();
  return broadcast_from_last(value);
}

double StageRunner::broadcast_from_last(double value) {
  torch::Tensor cell = torch::tensor({value}, torch::TensorOptions(torch::kFloat64).device(pipeline_.device()));
  pipeline_.broadcast(cell, stages() - 1);
  return cell.item<double>();
}

void StageRunner::add_log_fields(nlohmann::json& record) const {
  record["pipeline_bubble"] = last_bubble_;
  record["activation_bytes"] = link_.bytes_sent();
  // With pipeline.bandwidth_mbps: the seconds its messages (and the loss broadcasts) took on the emulated
  // link, waited out, so that the bubble shows them.
  if (const double emulated_s = pipeline_.stats().emulated_s; emulated_s > 0) record["activation_link_s"] = emulated_s;
}

}  // namespace loco::pipeline
