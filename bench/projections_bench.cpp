// The inputs of attention and the MLP, forward and backward, two ways in the same run:
//   separate  q, k, v as three matmuls and rotary with a roll (x·cos + roll(x, D/2)·[−sin, sin]), gate and
//             up as two matmuls and silu(g)·u: the forms loco used before;
//   stacked   loco's: one matmul over the weights stored back to back (src/loco/model/stacked_rows.h), the
//             rotary function on q and k at once (rotary.h), swiglu (swiglu.h).
// The forms alternate within each repeat; the best of K repeats after one warm-up is printed, one JSON
// line per block and form, and the largest difference of the outputs and input gradients between forms.
//
//   build/loco_projections_bench [--batch B] [--seq T] [--hidden C] [--heads H] [--kv-heads KV]
//                                [--intermediate I] [--device cpu|cuda] [--bf16] [--repeats K]
//
// Defaults: the CPU's size (4 × 256 tokens, hidden 256, 8 heads, intermediate 688). The GPU benchmark's
// 125M model: --batch 32 --seq 1024 --hidden 768 --heads 12 --kv-heads 12 --intermediate 2048 --device cuda
// --bf16 (bf16 autocast, as training runs).
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_args.h"
#include "loco/model/rotary.h"
#include "loco/model/stacked_rows.h"
#include "loco/model/swiglu.h"
#include "loco/util/torch_compat.h"

namespace {

struct Options {
  std::int64_t batch = 4, seq = 256, hidden = 256, heads = 8, kv_heads = 8, intermediate = 688;
  int repeats = 10;
  std::string device = "cpu";
  bool bf16 = false;
};

// Leaf weights of the given row counts, stored back to back in one buffer (as the optimizer's flat buffer
// stores them) or each in a tensor of its own.
std::vector<torch::Tensor> weights(const std::vector<std::int64_t>& rows, std::int64_t columns, bool adjacent,
                                   const torch::TensorOptions& options) {
  std::int64_t total = 0;
  for (std::int64_t r : rows) total += r * columns;
  const torch::Tensor buffer = torch::randn({total}, options) * 0.02;
  std::vector<torch::Tensor> out;
  std::int64_t offset = 0;
  for (std::int64_t r : rows) {
    torch::Tensor w = buffer.narrow(0, offset, r * columns).view({r, columns});
    out.push_back((adjacent ? w.detach() : w.clone()).set_requires_grad(true));
    offset += r * columns;
  }
  return out;
}

// HF's rotary with the halves' signs in the sin table and one roll: what loco did before rotary.h. The
// tables are cached per dtype, as loco cached them.
class RollRotary {
 public:
  RollRotary(std::int64_t seq, std::int64_t head_dim, double theta, const torch::Device& device) {
    const auto f32 = torch::TensorOptions().device(device);
    const std::int64_t half = head_dim / 2;
    const torch::Tensor inv_freq =
        1.0 / torch::pow(theta, torch::arange(0, head_dim, 2, f32) / static_cast<double>(head_dim));
    const torch::Tensor freqs = torch::outer(torch::arange(seq, f32), inv_freq);
    const torch::Tensor angles = torch::cat({freqs, freqs}, -1);
    const torch::Tensor sin = angles.sin();
    cos_ = angles.cos().unsqueeze(1);  // (T, 1, D)
    signed_sin_ = torch::cat({-sin.narrow(-1, 0, half), sin.narrow(-1, half, half)}, -1).unsqueeze(1);
  }

  torch::Tensor apply(const torch::Tensor& x) {
    if (cos_.scalar_type() != x.scalar_type()) {
      cos_ = cos_.to(x.scalar_type());
      signed_sin_ = signed_sin_.to(x.scalar_type());
    }
    return torch::addcmul(x * cos_, x.roll(x.size(-1) / 2, -1), signed_sin_);
  }

 private:
  torch::Tensor cos_, signed_sin_;
};

struct Block {
  std::string name;
  // Outputs from the input, for one form; the weights are the form's own.
  std::function<std::vector<torch::Tensor>(const torch::Tensor&, bool stacked)> run;
};

struct Result {
  double best_s = 1e30;
  std::vector<torch::Tensor> outputs;
  torch::Tensor input_grad;
};

void time_once(const Block& block, bool stacked, const torch::Tensor& x, const Options& o, Result& result) {
  torch::Tensor input = x.detach().clone().set_requires_grad(true);
  const auto start = std::chrono::steady_clock::now();
  std::vector<torch::Tensor> outputs;
  {
    loco::compat::CudaBf16Autocast autocast(o.bf16);
    outputs = block.run(input, stacked);
  }
  std::vector<torch::Tensor> upstream;
  for (const torch::Tensor& out : outputs) upstream.push_back(torch::ones_like(out));
  torch::autograd::backward(outputs, upstream);
  (void)input.grad().sum().item<double>();  // waits for the device
  result.best_s = std::min(result.best_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  result.outputs.clear();
  for (const torch::Tensor& out : outputs) result.outputs.push_back(out.detach().to(torch::kFloat32));
  result.input_grad = input.grad().to(torch::kFloat32);
}

double max_difference(const Result& a, const Result& b) {
  double worst = (a.input_grad - b.input_grad).abs().max().item<double>();
  for (std::size_t i = 0; i < a.outputs.size(); ++i) {
    worst = std::max(worst, (a.outputs[i] - b.outputs[i]).abs().max().item<double>());
  }
  return worst;
}

// Times both forms of `block` on x and prints a JSON line for each.
void report(const Block& block, const torch::Tensor& x, const Options& o) {
  Result separate, stacked;
  for (int r = 0; r <= o.repeats; ++r) {  // r = 0 warms up; the forms alternate which goes first
    const bool stacked_first = r % 2 == 1;
    time_once(block, stacked_first, x, o, stacked_first ? stacked : separate);
    time_once(block, !stacked_first, x, o, stacked_first ? separate : stacked);
    if (r == 0) separate.best_s = stacked.best_s = 1e30;
  }
  const double difference = max_difference(separate, stacked);
  for (const auto& [form, result] : {std::pair{"separate", &separate}, std::pair{"stacked", &stacked}}) {
    const nlohmann::json line = {{"block", block.name},       {"form", form},         {"batch", x.size(0)},
                                 {"seq", x.size(1)},          {"hidden", x.size(2)},  {"heads", o.heads},
                                 {"kv_heads", o.kv_heads},    {"device", o.device},   {"bf16", o.bf16},
                                 {"ms", result->best_s * 1e3}, {"max_abs_difference", difference}};
    fmt::print("{}\n", line.dump());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto count = [&] { return loco::bench::positive_flag_value(argc, argv, i); };
    if (a == "--batch") o.batch = count();
    else if (a == "--seq") o.seq = count();
    else if (a == "--hidden") o.hidden = count();
    else if (a == "--heads") o.heads = count();
    else if (a == "--kv-heads") o.kv_heads = count();
    else if (a == "--intermediate") o.intermediate = count();
    else if (a == "--repeats") o.repeats = static_cast<int>(std::min<std::int64_t>(count(), 1000));
    else if (a == "--device") o.device = loco::bench::flag_value(argc, argv, i);
    else if (a == "--bf16") o.bf16 = true;
    else {
      fmt::print(stderr, "unknown argument {} (see the comment at the top of bench/projections_bench.cpp)\n", a);
      return 2;
    }
  }
  loco::bench::require_device_flags(o.device, o.bf16);
  const std::int64_t head_dim = o.hidden / o.heads;
  if (o.hidden % o.heads != 0 || head_dim % 2 != 0 || o.heads % o.kv_heads != 0) {
    fmt::print(stderr, "--hidden must be an even multiple of --heads, and --heads a multiple of --kv-heads\n");
    return 2;
  }
  if (o.device == "cuda" && !torch::cuda::is_available()) {
    fmt::print(stderr, "--device cuda: this libtorch has no CUDA, or no GPU is visible\n");
    return 1;
  }
  const auto f32 = torch::TensorOptions().device(torch::Device(o.device));
  const std::int64_t B = o.batch, T = o.seq, H = o.heads, KV = o.kv_heads, D = head_dim, C = o.hidden;
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({B, T, C}, f32);
  constexpr double kTheta = 10000.0;

  std::vector<std::vector<torch::Tensor>> qkv(2), gate_up(2);  // [stacked?]: each form's own weights
  for (const bool stacked : {false, true}) {
    torch::manual_seed(2);
    qkv[stacked] = weights({H * D, KV * D, KV * D}, C, stacked, f32);
    torch::manual_seed(3);
    gate_up[stacked] = weights({o.intermediate, o.intermediate}, C, stacked, f32);
  }
  loco::RotaryEmbedding rotary(D, kTheta);
  RollRotary roll_rotary(T, D, kTheta, x.device());
  const std::vector<Block> blocks = {
      {"attention q/k/v + rotary",
       [&](const torch::Tensor& in, bool stacked) -> std::vector<torch::Tensor> {
         const auto& w = qkv[stacked];
         if (!stacked) {
           namespace F = torch::nn::functional;
           return {roll_rotary.apply(F::linear(in, w[0]).view({B, T, H, D})),
                   roll_rotary.apply(F::linear(in, w[1]).view({B, T, KV, D})),
                   F::linear(in, w[2]).view({B, T, KV, D})};
         }
         const torch::Tensor all =
             torch::nn::functional::linear(in, loco::stacked_rows(w)).view({B, T, H + 2 * KV, D});
         const auto qk_v = all.split_with_sizes({H + KV, KV}, 2);  // as src/loco/model/attention.cpp
         const auto q_k = rotary.apply(qk_v[0]).split_with_sizes({H, KV}, 2);
         return {q_k[0], q_k[1], qk_v[1]};
       }},
      {"mlp gate/up + swiglu",
       [&](const torch::Tensor& in, bool stacked) -> std::vector<torch::Tensor> {
         const auto& w = gate_up[stacked];
         namespace F = torch::nn::functional;
         if (!stacked) return {torch::silu(F::linear(in, w[0])) * F::linear(in, w[1])};
         return {loco::swiglu(F::linear(in, loco::stacked_rows(w)))};
       }},
  };
  try {
    for (const Block& block : blocks) report(block, x, o);
  } catch (const c10::Error& e) {  // e.g. not enough memory for the shape asked
    fmt::print(stderr, "{}\n", e.what_without_backtrace());
    return 1;
  }
  return 0;
}
