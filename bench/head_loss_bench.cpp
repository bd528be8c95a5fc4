// The language-model head and its loss, forward and backward, two ways in the same run: the plain form
// (logits of the whole micro-batch, cross_entropy in float32) and loco's chunked form
// (src/loco/model/head_loss.h). Each runs in a child process of its own, so that the peak resident
// memory of each (ru_maxrss) is its own; on CUDA the time is what to read (device memory is not
// in ru_maxrss).
//
//   build/loco_head_loss_bench [--rows N] [--hidden C] [--vocab V] [--device cpu|cuda] [--bf16]
//                              [--chunk-rows R] [--repeats K]
//
// Defaults: one micro-batch of the GPU benchmark's 125M model (32 × 1024 rows, hidden 768, vocab 32000)
// would take 12 GB here; the defaults are the CPU's size (8 × 256 rows, hidden 256, vocab 32000). --bf16
// runs under CUDA bf16 autocast, as training does. Prints one JSON line per form: the best of K
// timed repeats after one warm-up, and the child's peak RSS.
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "bench_args.h"
#include "loco/model/head_loss.h"
#include "loco/util/torch_compat.h"

namespace {

struct Options {
  std::int64_t rows = 8 * 256, hidden = 256, vocab = 32000, chunk_rows = 0;
  int repeats = 5;
  std::string device = "cpu";
  bool bf16 = false;
};

// Forward and backward of one form; the best of the repeats, in seconds.
double time_form(const Options& o, bool chunked) {
  const torch::Device device(o.device);
  torch::manual_seed(1);
  const auto f32 = torch::TensorOptions().device(device);
  const torch::Tensor hidden = torch::randn({o.rows, o.hidden}, f32).set_requires_grad(true);
  const torch::Tensor weight = (torch::randn({o.vocab, o.hidden}, f32) * 0.02).set_requires_grad(true);
  const torch::Tensor targets =
      torch::randint(0, o.vocab, {o.rows}, torch::TensorOptions(torch::kInt64).device(device));
  double best = 1e30;
  for (int r = 0; r <= o.repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    torch::Tensor loss;
    {
      loco::compat::CudaBf16Autocast autocast(o.bf16);
      loss = chunked
                 ? loco::head_cross_entropy(hidden, weight, targets, o.chunk_rows)
                 : torch::nn::functional::cross_entropy(torch::matmul(hidden, weight.t()).to(torch::kFloat32), targets);
    }
    loss.backward();
    (void)loss.item<double>();  // waits for the device
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) best = std::min(best, seconds);  // r = 0 warms up
    hidden.mutable_grad().reset();
    weight.mutable_grad().reset();
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return loco::bench::flag_value(argc, argv, i); };
    auto count = [&] { return loco::bench::positive_flag_value(argc, argv, i); };
    if (a == "--rows")
      o.rows = count();
    else if (a == "--hidden")
      o.hidden = count();
    else if (a == "--vocab")
      o.vocab = count();
    else if (a == "--chunk-rows")
      o.chunk_rows = count();
    else if (a == "--repeats")
      o.repeats = static_cast<int>(std::min<std::int64_t>(count(), 1000));
    else if (a == "--device")
      o.device = next();
    else if (a == "--bf16")
      o.bf16 = true;
    else {
      fmt::print(stderr, "unknown argument {} (see the comment at the top of bench/head_loss_bench.cpp)\n", a);
      return 2;
    }
  }
  loco::bench::require_device_flags(o.device, o.bf16);
  // A child per form, forked before this process touches libtorch's thread pools.
  for (const bool chunked : {false, true}) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return 1;
    const pid_t child = fork();
    if (child < 0) {
      fmt::print(stderr, "cannot start a process for the {} form: {}\n", chunked ? "chunked" : "plain",
                 std::strerror(errno));
      return 1;
    }
    if (child == 0) {
      close(pipe_fds[0]);
      if (o.device == "cuda" && !torch::cuda::is_available()) {
        fmt::print(stderr, "--device cuda: this libtorch has no CUDA, or no GPU is visible\n");
        _exit(1);
      }
      double seconds = 0;
      try {
        seconds = time_form(o, chunked);
      } catch (const c10::Error& e) {  // e.g. no CUDA in this libtorch, or not enough memory
        fmt::print(stderr, "{}\n", e.what_without_backtrace());
        _exit(1);
      }
      const std::string text = fmt::format("{}", seconds);
      (void)!write(pipe_fds[1], text.data(), text.size());
      _exit(0);
    }
    close(pipe_fds[1]);
    char buffer[64] = {};
    const ssize_t got = read(pipe_fds[0], buffer, sizeof(buffer) - 1);
    close(pipe_fds[0]);
    int status = 0;
    rusage usage{};
    wait4(child, &status, 0, &usage);
    if (got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fmt::print(stderr, "the {} form failed ({})\n", chunked ? "chunked" : "plain",
                 WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status))
                                     : fmt::format("exit status {}", WEXITSTATUS(status)));
      return 1;
    }
    nlohmann::json line = {{"form", chunked ? "chunked" : "plain"},
                           {"rows", o.rows},
                           {"hidden", o.hidden},
                           {"vocab", o.vocab},
                           {"device", o.device},
                           {"bf16", o.bf16},
                           {"ms", std::stod(buffer) * 1e3},
                           {"peak_rss_mb", usage.ru_maxrss / 1024.0}};
    fmt::print("{}\n", line.dump());
  }
  return 0;
}
