// Runs M simulated replicas of a distributed-training strategy on the tiny float64 model of the
// algorithm fixtures (tests/fixtures/algorithms_*.safetensors, README "Algorithm fixtures"), the way
// the trainer drives a strategy, and returns what each replica ended with.
//
// Per replica (one thread each, comm::run_local_replicas): a float64 Llama with the fixture's
// param/<name>, InnerOptimizer (AdamW as in the fixture's "inner" metadata), an EmulatedClock that
// never advances, and make_strategy(config, {&group, &clock, steps, train.seed, tokens per step}). Each step k = 0..steps-1:
//   set_lr(lr0·decay^k); zero_grad; for each micro-batch: before_backward(last), loss/n, backward;
//   after_backward; clip_gradients; step; after_step(k + 1).
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "loco/comm/group.h"
#include "loco/config/run_config.h"
#include "loco/io/safetensors.h"
#include "loco/train/flat_parameters.h"

namespace loco::test {

struct AlgorithmFixture {
  SafetensorsContent content;
  nlohmann::json model;            // __metadata__["config"] (HF LlamaConfig keys)
  nlohmann::json inner;            // __metadata__["inner"]: lr0, lr_decay, betas, eps, ...
  nlohmann::json hyperparameters;  // __metadata__["hyperparameters"]

  const torch::Tensor& at(const std::string& name) const;
  // Every tensor named "<prefix>/<parameter>", as (parameter, tensor), in name order.
  NamedTensors parameters(const std::string& prefix) const;
  double scalar(const std::string& name) const { return at(name).item<double>(); }
};

// Loads tests/fixtures/<file>.
AlgorithmFixture load_algorithm_fixture(const std::string& file);

struct Batch {
  torch::Tensor input_ids;  // (rows, T) int64
  torch::Tensor labels;     // (rows, T) int64
};

// The fixture's batches "<prefix>input_ids/<m>", "<prefix>labels/<m>" for m < replicas.
std::vector<Batch> fixture_batches(const AlgorithmFixture& fixture, int replicas, const std::string& prefix = "");

// A config for `algorithm` with M = replicas: the fixture's model and inner optimizer, one batch of
// `rows` sequences per replica; the algorithm's own section keeps its defaults for the test to set.
RunConfig algorithm_config(const AlgorithmFixture& fixture, const std::string& algorithm, int replicas,
                           std::int64_t rows = 2);

struct ReplicaRun {
  std::vector<double> losses;      // per step, the loss before it (sum of the micro-batches' loss/n)
  NamedTensors parameters;         // the replica's own model parameters after the last step
  NamedTensors evaluation;         // the model's parameters inside with_evaluation_parameters
  NamedTensors strategy_state;     // state_tensors() after the last step
  std::vector<FlatParameters::Slot> slots;  // layout of the flat parameter buffers
  std::vector<std::int64_t> group_numel;    // elements of each buffer
  comm::CommStats comm;                     // the replica's group after the last step
};

// Runs batches.size() replicas for `steps` steps; replica m trains on batches[m] at every step,
// split into `micro_batches` equal row slices (gradient accumulation). `group` sets the replicas' link
// (emulated latency, ...); each step sleeps `step_pause` before after_step, standing for compute that
// exchanges in the background can hide.
std::vector<ReplicaRun> run_replicas(const AlgorithmFixture& fixture, const RunConfig& config,
                                     const std::vector<Batch>& batches, std::int64_t steps, int micro_batches = 1,
                                     const comm::GroupOptions& group = {},
                                     std::chrono::milliseconds step_pause = std::chrono::milliseconds(0));

// max |a − b| over parameters matched by name (every name of `a` must be in `b` with the same shape).
double max_abs_diff(const NamedTensors& a, const NamedTensors& b);

// The named tensor `name` of a strategy's state_tensors().
torch::Tensor state_tensor(const ReplicaRun& run, const std::string& name);

// A whole-model flat vector (group buffers one after the other, as strategies hold θ_g, b, φ) as
// named parameter tensors.
NamedTensors unflatten_whole_model(const ReplicaRun& run, const torch::Tensor& flat);

}  // namespace loco::test
