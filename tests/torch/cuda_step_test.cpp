// The GPU step (note "cuda-graphs"): the fused AdamW update against libtorch's torch::optim::AdamW, and a
// training run with its step captured as CUDA graphs against the same run launched kernel by kernel.
// They need a CUDA device and skip without one (every CPU machine); bench/gpu_check.sh runs them on a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "loco/train/cuda_graph.h"
#include "loco/train/inner_optimizer.h"
#include "loco/train/trainer.h"
#include "support/test_support.h"
#include "torch/tiny_run.h"

namespace loco {
namespace {

namespace fs = std::filesystem;

#define SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"

// A matrix (decayed) and a vector (not decayed), as the two optimizer groups hold them.
NamedTensors parameters_on(const torch::Device& device) {
  torch::manual_seed(5);
  NamedTensors parameters{{"w", torch::randn({64, 48}, torch::kFloat64) * 0.02},
                          {"norm", 1 + torch::randn({48}, torch::kFloat64) * 0.1}};
  for (auto& [name, p] : parameters) p = p.to(device, torch::kFloat32).set_requires_grad(true);
  return parameters;
}

// Six steps with a new learning rate and gradient each, clipped (norm 1) on the even ones; the fused CUDA
// update and the CPU's torch::optim::AdamW see the same float32 gradients and must agree to float rounding.
TEST(CudaStep, FusedAdamWMatchesTorchOptimAdamW) {
  SKIP_WITHOUT_CUDA();
  OptimConfig config;
  config.resolved_weight_decay = 0.1;
  config.beta2 = 0.95;
  InnerOptimizer on_gpu(parameters_on(torch::kCUDA), config, /*fused_on_cuda=*/true);
  InnerOptimizer on_cpu(parameters_on(torch::kCPU), config, /*fused_on_cuda=*/true);
  ASSERT_TRUE(on_gpu.updates_on_device()) << "a CUDA build without the captured GPU step (LOCO_CUDA_GRAPHS)";
  ASSERT_FALSE(on_cpu.updates_on_device());
  torch::manual_seed(11);
  for (int step = 0; step < 6; ++step) {
    const double lr = 1e-3 * (1 + step);
    for (InnerOptimizer* optimizer : {&on_gpu, &on_cpu}) optimizer->set_lr(lr);
    for (std::size_t g = 0; g < on_cpu.parameters().groups(); ++g) {
      const torch::Tensor grad = torch::randn_like(on_cpu.parameters().buffer(g)) * (step + 1);
      on_cpu.parameters().buffer(g).grad().copy_(grad);
      on_gpu.parameters().buffer(g).grad().copy_(grad);
    }
    const double max_norm = step % 2 == 0 ? 1.0 : 0.0;
    const double gpu_norm = on_gpu.clip_gradients(max_norm).item<double>();
    EXPECT_NEAR(gpu_norm, on_cpu.clip_gradients(max_norm).item<double>(), 1e-5 * gpu_norm) << "step " << step;
    on_gpu.step();
    on_cpu.step();
  }
  EXPECT_EQ(on_gpu.steps_taken(), 6);
  for (std::size_t g = 0; g < on_cpu.parameters().groups(); ++g) {
    const torch::Tensor expected = on_cpu.parameters().buffer(g).detach();
    const torch::Tensor got = on_gpu.parameters().buffer(g).detach().cpu();
    EXPECT_LT((got - expected).abs().max().item<double>(), 3e-6) << "group " << g;
    // The steps moved the parameters by far more than that (a flipped sign would show). Group g holds the
    // g-th parameter alone.
    EXPECT_GT((expected - parameters_on(torch::kCPU)[g].second.flatten()).abs().max().item<double>(), 1e-3);
  }
  const NamedTensors gpu_state = on_gpu.state_tensors(), cpu_state = on_cpu.state_tensors();
  ASSERT_EQ(gpu_state.size(), cpu_state.size());
  for (std::size_t i = 0; i < cpu_state.size(); ++i) {
    const double scale = cpu_state[i].second.abs().max().item<double>();
    EXPECT_LT((gpu_state[i].second.cpu() - cpu_state[i].second).abs().max().item<double>(), 1e-5 * scale)
        << cpu_state[i].first;
  }
}

struct Run {
  std::vector<double> losses;
  std::vector<nlohmann::json> metrics;
};

Run train_on_cuda(const RunConfig& base, const std::string& name, bool graphs,
                  std::optional<fs::path> resume = std::nullopt) {
  RunConfig config = base;
  config.train.device = "cuda";
  config.train.cuda_graphs = graphs;
  config.train.out_dir = (fs::path(base.train.out_dir).parent_path() / name).string();
  Trainer trainer(TrainOptions{config, resume, /*quiet=*/true});
  trainer.run();
  return {trainer.step_losses(), test::read_metrics(config.train.out_dir)};
}

void expect_same_losses(const std::vector<double>& captured, const std::vector<double>& launched) {
  ASSERT_EQ(captured.size(), launched.size());
  for (std::size_t i = 0; i < launched.size(); ++i) {
    EXPECT_NEAR(captured[i], launched[i], 1e-5 * launched[i]) << "step " << i + 1;
  }
}

// 4 micro-batches per step: the micro-batch graph is captured at the first step's fourth micro-batch, the
// update graph at the fourth step; every step after replays both. Losses and gradient norms as launched.
void expect_capture_changes_nothing(const std::string& autocast) {
  test::ScratchDir dir;
  RunConfig config = test::tiny_run_config(dir.path(), "base", 12);
  config.train.batch_size = 8;
  config.train.micro_batch_size = 2;
  config.train.autocast = autocast;
  config.train.checkpoint_every = 6;
  const Run captured = train_on_cuda(config, "captured", true);
  const Run launched = train_on_cuda(config, "launched", false);
  expect_same_losses(captured.losses, launched.losses);
  ASSERT_EQ(captured.metrics.size(), 12u);
  EXPECT_TRUE(captured.metrics.back().value("cuda_graphs", false)) << "the step was not captured";
  EXPECT_FALSE(launched.metrics.back().contains("cuda_graphs"));
  for (std::size_t i = 0; i < captured.metrics.size(); ++i) {
    const double norm = launched.metrics[i].at("grad_norm");
    EXPECT_NEAR(captured.metrics[i].at("grad_norm").get<double>(), norm, 1e-4 * norm) << "step " << i + 1;
  }
  // A resume captures again (the optimizer's state was loaded) and continues the captured run's losses.
  const Run resumed = train_on_cuda(config, "resumed", true, fs::path(dir / "captured" / "checkpoints" / "step_6"));
  expect_same_losses(resumed.losses, std::vector<double>(captured.losses.begin() + 6, captured.losses.end()));
  EXPECT_TRUE(resumed.metrics.back().value("cuda_graphs", false));
}

TEST(CudaStep, ACapturedStepTrainsAsTheLaunchedOne) {
  SKIP_WITHOUT_CUDA();
  ASSERT_TRUE(cuda_graphs_supported()) << "a CUDA build without CUDA graphs";
  expect_capture_changes_nothing("none");
}

TEST(CudaStep, ACapturedStepTrainsAsTheLaunchedOneUnderBf16Autocast) {
  SKIP_WITHOUT_CUDA();
  ASSERT_TRUE(cuda_graphs_supported()) << "a CUDA build without CUDA graphs";
  expect_capture_changes_nothing("bf16");
}

}  // namespace
}  // namespace loco
