// How replicas cooperate (DESIGN.md §3 "Strategy"). The trainer owns the inner loop and calls the
// strategy around every inner step; a strategy decides when and what to exchange and owns any
// outer state (global parameters, momentum buffers), which it serialises into checkpoints.
//
//   for each step:  forward/backward on micro-batches → after_backward → clip → AdamW → after_step
//
// This issue ships one strategy, a single replica that exchanges nothing; ddp, diloco, streaming,
// noloco and localsgd plug in here.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "loco/io/safetensors.h"
#include "loco/model/llama.h"

namespace loco {

class Strategy {
 public:
  virtual ~Strategy() = default;

  // The exact form used, for logs and metrics (e.g. "diloco: nesterov(pytorch) eta=0.7 mu=0.9 H=100").
  virtual std::string describe() const = 0;
  // Gradients of the last micro-batch are in place; data parallel averages them here.
  virtual void after_backward(Llama& model) = 0;
  // The inner optimizer has stepped (`step` steps done); DiLoCo-style strategies sync here.
  virtual void after_step(Llama& model, std::int64_t step) = 0;

  // Outer state for checkpoints: tensors and scalars; restored before training continues.
  virtual NamedTensors state_tensors() const = 0;
  virtual nlohmann::json state_json() const = 0;
  virtual void load_state(const SafetensorsContent& tensors, const nlohmann::json& json) = 0;
};

// One replica, no communication: plain training.
class SingleReplica final : public Strategy {
 public:
  std::string describe() const override { return "single replica (no communication)"; }
  void after_backward(Llama&) override {}
  void after_step(Llama&, std::int64_t) override {}
  NamedTensors state_tensors() const override { return {}; }
  nlohmann::json state_json() const override { return nlohmann::json::object(); }
  void load_state(const SafetensorsContent&, const nlohmann::json&) override {}
};

}  // namespace loco
