// Cost of DiLoCo's outer step (issue 5 "Performance"): the time of one sync of a model on this
// machine's CPU, against one inner step, and the fraction of training time the outer step takes at
// H inner steps per sync: outer / (H·inner + outer).
//
//   build/loco_outer_step_bench [CONFIG.toml] [--replicas M] [--batch B] [--micro-batches K] [--seq T]
//                               [--repeats R] [--every H] [--device cpu|cuda] [--set KEY=VALUE ...]
//                               (e.g. --set dist.aggregation=clip)
//
// An inner step is K forward/backward passes of B × T tokens, then clipping and AdamW: a training step
// of K micro-batches.
//
// CONFIG defaults to configs/llama-125m.toml (the model section is what matters). Replicas are
// threads with a LocalGroup (one intra-op thread each), so M > 1 also counts the in-process
// all-reduce. --device cuda times one replica on the GPU (the in-process group is not what GPU runs
// exchange through), its inner step under bf16 autocast as training runs it. With --set dist.algorithm=sparseloco it also times the sparse exchange's parts on the
// model's tensors (algo/sparse_exchange.h: error feedback, top-k and encoding; the all-gather; decoding
// and aggregating every replica's), and the codec's share of a round of H inner steps (on the CPU only).
// Prints one JSON line.
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "bench_args.h"
#include "loco/algo/make_strategy.h"
#include "loco/algo/sparse_exchange.h"
#include "loco/train/fixed_membership.h"
#include "loco/comm/local/local_group.h"
#include "loco/config/load_config.h"
#include "loco/model/weights.h"
#include "loco/train/emulated_clock.h"
#include "loco/train/inner_optimizer.h"
#include "loco/util/torch_compat.h"

namespace {

// Seconds of f, including the device's work it queued.
double seconds_of(const std::function<void()>& f, const torch::Device& device) {
  const auto start = std::chrono::steady_clock::now();
  f();
  if (device.is_cuda()) torch::cuda::synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_file = "configs/llama-125m.toml";
  int replicas = 1, repeats = 3;
  std::int64_t batch = 1, seq = 256, every = 100, micro_batches = 1;
  std::vector<std::string> overrides;
  std::string device_name = "cpu";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return loco::bench::flag_value(argc, argv, i); };
    auto count = [&] { return loco::bench::positive_flag_value(argc, argv, i); };
    if (a == "--replicas") replicas = static_cast<int>(std::min<std::int64_t>(count(), 1 << 20));
    else if (a == "--batch") batch = count();
    else if (a == "--micro-batches") micro_batches = count();
    else if (a == "--seq") seq = count();
    else if (a == "--repeats") repeats = static_cast<int>(std::min<std::int64_t>(count(), 1000));
    else if (a == "--every") every = count();
    else if (a == "--set") overrides.push_back(next());
    else if (a == "--device") device_name = next();
    else if (a.rfind("--", 0) == 0) {
      std::cerr << "unknown argument " << a << " (see the comment at the top of bench/outer_step_bench.cpp)\n";
      return 2;
    }
    else config_file = a;
  }
  loco::bench::require_device_flags(device_name, false);
  if (device_name == "cuda" && (replicas != 1 || !torch::cuda::is_available())) {
    std::cerr << (replicas != 1 ? "--device cuda times one replica (--replicas 1): the in-process group is not what "
                                  "GPU runs exchange through\n"
                                : "--device cuda: this libtorch has no CUDA, or no GPU is visible\n");
    return 2;
  }
  const torch::Device device(device_name);
  std::vector<std::string> settings = {"dist.algorithm=diloco", "diloco.sync_every=1", "sparseloco.sync_every=1",
                                       fmt::format("dist.replicas={}", replicas), "train.device=" + device_name,
                                       "train.autocast=none", "dist.batch=per_replica",
                                       fmt::format("data.seq_len={}", seq), "model.max_position_embeddings=0"};
  settings.insert(settings.end(), overrides.begin(), overrides.end());
  loco::RunConfig config;
  try {
    config = loco::load_run_config(config_file, settings);
  } catch (const std::exception& e) {  // a file that is not there, a key that is not one
    std::cerr << e.what() << "\n";
    return 2;
  }
  if (config.model.vocab_size <= 0) {
    std::cerr << config_file << " takes its vocabulary from its data: add --set model.vocab_size=N\n";
    return 2;
  }
  torch::set_num_threads(1);
  nlohmann::json result;
  loco::comm::run_local_replicas(replicas, [&](loco::comm::Group& group) {
    torch::set_num_threads(1);
    torch::manual_seed(0);
    loco::Llama model(config.model);
    model->to(device);
    loco::InnerOptimizer optimizer(loco::model_parameters(model), config.optim);
    loco::EmulatedClock clock([] { return 0.0; });
    loco::FixedMembership membership(&group, replicas, /*shared_data=*/true);
    const loco::ReplicaContext context{&group,   &clock, 1 << 30, static_cast<std::uint64_t>(config.train.seed),
                                       config.replica_batch() * config.data.seq_len,
                                       nullptr,  &membership};
    auto strategy = loco::make_strategy(config, context);
    strategy->attach(model, optimizer.parameters());
    const torch::Tensor tokens = torch::randint(config.model.vocab_size, {batch, seq}, torch::kInt64).to(device);
    auto inner_step = [&] {
      optimizer.zero_grad();
      for (std::int64_t m = 0; m < micro_batches; ++m) {
        torch::Tensor loss;
        {
          loco::compat::CudaBf16Autocast autocast(device.is_cuda());
          loss = model->loss(tokens, tokens);
        }
        loss.backward();
      }
      optimizer.clip_gradients(1.0);
      optimizer.step();
    };
    inner_step();  // warm-up: allocations and AdamW state
    const double inner_s = seconds_of(inner_step, device);
    std::vector<double> outer;
    for (int r = 0; r < repeats; ++r) outer.push_back(seconds_of([&] { strategy->after_step(r + 1); }, device));
    std::sort(outer.begin(), outer.end());
    // The sparse exchange's parts, on a pseudo-gradient of the size an outer step sees.
    nlohmann::json codec;
    if (config.dist.algorithm == "sparseloco" && !device.is_cuda()) {  // its parts' timers read the host's clock
      std::vector<std::vector<std::int64_t>> shapes;
      for (const auto& slot : optimizer.parameters().slots()) shapes.push_back(slot.sizes);
      const loco::SparselocoConfig& s = config.sparseloco;
      const loco::SparseSettings settings{s.beta, static_cast<std::size_t>(s.topk), static_cast<int>(s.bits),
                                          s.average == "contributors"};
      const loco::SparseLayout layout(shapes, settings);
      std::vector<loco::SparseRound> rounds;
      for (int r = 0; r < repeats; ++r) {
        torch::Tensor delta = torch::randn({layout.numel()}).mul_(1e-3);
        rounds.push_back(loco::sparse_exchange(group, layout, settings, config.exchange().aggregation,
                                               torch::zeros({layout.numel()}), delta, 1.0, true, "bench"));
      }
      const auto median = [&](double loco::SparseRound::*part) {
        std::vector<double> v;
        for (const auto& round : rounds) v.push_back(round.*part);
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      const double encode_s = median(&loco::SparseRound::encode_s), decode_s = median(&loco::SparseRound::decode_s);
      codec = {{"payload_bytes", layout.payload_bytes()},
               {"layout", layout.describe()},
               {"encode_s", encode_s},
               {"gather_s", median(&loco::SparseRound::gather_s)},
               {"decode_aggregate_s", decode_s},
               {"codec_fraction_of_outer_step", (encode_s + decode_s) / outer[outer.size() / 2]},
               {"codec_fraction_of_round_at_H", (encode_s + decode_s) / (static_cast<double>(every) * inner_s +
                                                                          outer[outer.size() / 2])}};
    }
    if (group.rank() != 0) return;
    const double outer_s = outer[outer.size() / 2];
    result = {{"benchmark", config.dist.algorithm + " outer step"},
              {"machine", cpu_model()},
              {"device", device_name},
              {"threads_per_replica", 1},
              {"parameters", model->num_parameters()},
              {"replicas", replicas},
              {"aggregation", config.dist.aggregation},
              {"outer_step_s", outer_s},
              {"inner_step_s", inner_s},
              {"inner_batch", fmt::format("{} x {} x {} tokens", micro_batches, batch, seq)},
              {"H", every},
              {"outer_fraction_at_H", outer_s / (static_cast<double>(every) * inner_s + outer_s)}};
    if (!codec.is_null()) result["sparse_codec"] = codec;
  });
  std::cout << result.dump() << std::endl;
  return 0;
}
