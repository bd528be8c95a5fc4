#include "torch/algorithm_harness.h"

#include <cmath>
#include <stdexcept>
#include <thread>

#include "loco/algo/make_strategy.h"
#include "loco/train/fixed_membership.h"
#include "loco/comm/local/local_group.h"
#include "loco/model/hf_export.h"
#include "loco/model/llama.h"
#include "loco/model/weights.h"
#include "loco/train/inner_optimizer.h"
#include "loco/train/emulated_clock.h"

namespace loco::test {

namespace {

NamedTensors cloned(const NamedTensors& tensors) {
  NamedTensors out;
  for (const auto& [name, t] : tensors) out.emplace_back(name, t.detach().clone());
  return out;
}

}  // namespace

const torch::Tensor& AlgorithmFixture::at(const std::string& name) const { return content.at(name); }

NamedTensors AlgorithmFixture::parameters(const std::string& prefix) const {
  NamedTensors out;
  const std::string head = prefix + "/";
  for (const auto& [name, t] : content.tensors) {
    if (name.rfind(head, 0) == 0 && name.find('/', head.size()) == std::string::npos) {
      out.emplace_back(name.substr(head.size()), t);
    }
  }
  if (out.empty()) throw std::runtime_error("fixture has no tensors under " + head);
  return out;
}

AlgorithmFixture load_algorithm_fixture(const std::string& file) {
  AlgorithmFixture f;
  f.content = load_safetensors(std::string(LOCO_FIXTURE_DIR) + "/" + file);
  f.model = nlohmann::json::parse(f.content.metadata.at("config"));
  f.inner = nlohmann::json::parse(f.content.metadata.at("inner"));
  f.hyperparameters = nlohmann::json::parse(f.content.metadata.at("hyperparameters"));
  return f;
}

std::vector<Batch> fixture_batches(const AlgorithmFixture& fixture, int replicas, const std::string& prefix) {
  std::vector<Batch> out;
  for (int m = 0; m < replicas; ++m) {
    out.push_back({fixture.at(prefix + "input_ids/" + std::to_string(m)),
                   fixture.at(prefix + "labels/" + std::to_string(m))});
  }
  return out;
}

RunConfig algorithm_config(const AlgorithmFixture& fixture, const std::string& algorithm, int replicas,
                           std::int64_t rows) {
  RunConfig c;
  c.model = model_config_from_hf_json(fixture.model);
  c.optim.lr = fixture.inner.at("lr0");
  c.optim.beta1 = fixture.inner.at("betas")[0];
  c.optim.beta2 = fixture.inner.at("betas")[1];
  c.optim.eps = fixture.inner.at("eps");
  c.optim.resolved_weight_decay = fixture.inner.at("weight_decay");
  c.optim.grad_clip = fixture.inner.at("max_grad_norm");
  c.optim.warmup_steps = 0;
  for (const auto& [name, t] : fixture.content.tensors) {
    if (name.find("input_ids/") != std::string::npos) c.data.seq_len = t.size(1);
  }
  c.dist.algorithm = algorithm;
  c.dist.replicas = replicas;
  c.dist.batch = "per_replica";
  c.train.batch_size = rows;
  c.train.micro_batch_size = rows;
  c.streaming.codec = "fp32";
  c.comm.codec = "fp32";
  return c;
}

std::vector<ReplicaRun> run_replicas(const AlgorithmFixture& fixture, const RunConfig& config,
                                     const std::vector<Batch>& batches, std::int64_t steps, int micro_batches,
                                     const comm::GroupOptions& group_options, std::chrono::milliseconds step_pause) {
  const int replicas = static_cast<int>(batches.size());
  const double lr0 = fixture.inner.at("lr0");
  const double decay = fixture.inner.at("lr_decay");
  std::vector<ReplicaRun> runs(static_cast<std::size_t>(replicas));
  comm::run_local_replicas(replicas, [&](comm::Group& group) {
    ReplicaRun& run = runs[static_cast<std::size_t>(group.rank())];
    const Batch& batch = batches[static_cast<std::size_t>(group.rank())];
    Llama model(config.model);
    model->to(torch::kFloat64);
    load_model_weights(model, fixture.content, "param/");
    InnerOptimizer optimizer(model_parameters(model), config.optim);
    EmulatedClock clock([] { return 0.0; });
    FixedMembership membership(&group, replicas, /*shared_data=*/true);
    const ReplicaContext context{&group,   &clock, steps, static_cast<std::uint64_t>(config.train.seed),
                                 config.replica_batch() * config.data.seq_len,
                                 nullptr,  &membership};
    auto strategy = make_strategy(config, context);
    strategy->attach(model, optimizer.parameters());
    const std::int64_t rows = batch.input_ids.size(0) / micro_batches;
    for (std::int64_t k = 0; k < steps; ++k) {
      optimizer.set_lr(lr0 * std::pow(decay, static_cast<double>(k)));
      optimizer.zero_grad();
      double step_loss = 0;
      for (int i = 0; i < micro_batches; ++i) {
        strategy->before_backward(i == micro_batches - 1);
        torch::Tensor loss = model->loss(batch.input_ids.narrow(0, i * rows, rows), batch.labels.narrow(0, i * rows, rows)) /
                             static_cast<double>(micro_batches);
        loss.backward();
        step_loss += loss.item<double>();
      }
      strategy->after_backward();
      optimizer.clip_gradients(config.optim.grad_clip);
      optimizer.step();
      std::this_thread::sleep_for(step_pause);
      strategy->after_step(k + 1);
      run.losses.push_back(step_loss);
    }
    run.parameters = cloned(model_parameters(model));
    strategy->with_evaluation_parameters([&] { run.evaluation = cloned(model_parameters(model)); });
    run.strategy_state = cloned(strategy->state_tensors());
    run.slots = optimizer.parameters().slots();
    for (std::size_t g = 0; g < optimizer.parameters().groups(); ++g) {
      run.group_numel.push_back(optimizer.parameters().buffer(g).numel());
    }
    run.comm = group.stats();
  }, group_options);
  return runs;
}

double max_abs_diff(const NamedTensors& a, const NamedTensors& b) {
  double worst = 0;
  for (const auto& [name, t] : a) {
    const torch::Tensor* other = nullptr;
    for (const auto& [n, u] : b) {
      if (n == name) other = &u;
    }
    if (other == nullptr || !other->sizes().equals(t.sizes())) {
      throw std::runtime_error("max_abs_diff: no tensor " + name + " of the same shape");
    }
    worst = std::max(worst, (t - *other).abs().max().item<double>());
  }
  return worst;
}

torch::Tensor state_tensor(const ReplicaRun& run, const std::string& name) {
  for (const auto& [n, t] : run.strategy_state) {
    if (n == name) return t;
  }
  throw std::runtime_error("strategy state has no tensor " + name);
}

NamedTensors unflatten_whole_model(const ReplicaRun& run, const torch::Tensor& flat) {
  std::vector<std::int64_t> group_start{0};
  for (auto n : run.group_numel) group_start.push_back(group_start.back() + n);
  if (flat.numel() != group_start.back()) throw std::runtime_error("flat vector of the wrong size");
  NamedTensors out;
  for (const auto& slot : run.slots) {
    std::int64_t numel = 1;
    for (auto s : slot.sizes) numel *= s;
    out.emplace_back(slot.name, flat.reshape({-1}).narrow(0, group_start[slot.group] + slot.offset, numel).view(slot.sizes));
  }
  return out;
}

}  // namespace loco::test
