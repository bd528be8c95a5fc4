#include "loco/train/memory_need.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>

#include "loco/config/algorithms.h"
#include "loco/util/error.h"

namespace loco {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kFloat32 = 4;
constexpr double kStateBytesPerParameter = 16;  // float32 weight, gradient, AdamW's exp_avg and exp_avg_sq

// A control group's memory limit (v2, then v1), or 0 when there is none.
double control_group_limit() {
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text == "max") continue;
    try {
      return std::stod(text);
    } catch (const std::exception&) {
      continue;
    }
  }
  return 0;
}

double strategy_bytes_per_parameter(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::none:
      return 0;
    case Algorithm::ddp:
      return kFloat32;
    case Algorithm::noloco:
      return 2 * kFloat32;
    case Algorithm::diloco:
    case Algorithm::streaming:
    case Algorithm::localsgd:
    case Algorithm::sparseloco:
      return 3 * kFloat32;
  }
  return 0;
}

}  // namespace

MemoryNeed memory_need(const RunConfig& config, std::int64_t first_layer, std::int64_t end_layer, bool takes_tokens,
                       bool gives_logits, bool keeps_attention_scores) {
  const ModelConfig& m = config.model;
  const double h = static_cast<double>(m.hidden_size), i = static_cast<double>(m.intermediate_size);
  const double kv = static_cast<double>(m.num_key_value_heads * m.head_dim());
  const double heads = static_cast<double>(m.num_attention_heads), T = static_cast<double>(config.data.seq_len);
  const double layers = static_cast<double>(end_layer - first_layer);
  // q and o (h·h each), k and v (h·kv each), gate, up and down (h·i each); norms left out.
  const double per_layer = 2 * h * h + 2 * h * kv + 3 * h * i;
  const double embedding = static_cast<double>(m.vocab_size) * h;
  double parameters = layers * per_layer;
  if (takes_tokens) parameters += embedding;
  if (gives_logits && !m.tie_word_embeddings) parameters += embedding;
  // Per token and layer, what the backward needs from the forward: the two norms' inputs and outputs (4h),
  // the attention's q, k and v (h + 2kv) and its output (h), the softmax's weights over the sequence (heads·T,
  // where the attention keeps them), and the MLP's gate and up (2i), gated product and its silu (2i).
  const double per_token_layer = 5 * h + 2 * kv + (keeps_attention_scores ? heads * T : 0) + 4 * i;
  const double tokens = static_cast<double>(config.train.micro_batch_size) * T;
  MemoryNeed need;
  need.parameters = static_cast<std::int64_t>(parameters);
  need.state_bytes = kStateBytesPerParameter * parameters;
  need.strategy_bytes = strategy_bytes_per_parameter(algorithm_named(config.dist.algorithm)) * parameters;
  need.activation_bytes = kFloat32 * tokens * layers * per_token_layer;
  return need;
}

namespace {

// The address space the process maps already (VmSize: libtorch's libraries alone are several hundred MB), or 0
// when it cannot be read.
double mapped_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmSize:", 0) == 0) return std::stod(line.substr(7)) * 1024;  // "VmSize:  612345 kB"
  }
  return 0;
}

// What OpenBLAS maps at its first matrix product: a 128 MiB buffer, which it retries without end while it does
// not fit (a run under ulimit -v hung at full CPU), and one more for a second thread.
constexpr double kBlasBuffersBytes = 256.0 * 1024 * 1024;

// The address space left under ulimit -v beside what is mapped and OpenBLAS's buffers; nullopt without a limit.
std::optional<double> address_space_left() {
  rlimit address_space{};
  if (::getrlimit(RLIMIT_AS, &address_space) != 0 || address_space.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<double>(address_space.rlim_cur) - mapped_bytes() - kBlasBuffersBytes;
}

}  // namespace

double usable_host_memory_bytes() {
  double usable = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (const double limit = control_group_limit(); limit > 0) usable = std::min(usable, limit);
  // An address-space limit (ulimit -v) bounds what the process can allocate, whatever the machine holds.
  if (const auto left = address_space_left()) usable = std::min(usable, std::max(*left, 1.0));
  return usable;
}

void require_room_to_compute(const std::string& command) {
  const auto left = address_space_left();
  if (!left || *left > 0) return;
  rlimit address_space{};
  ::getrlimit(RLIMIT_AS, &address_space);
  throw ConfigError(fmt::format(
      "{} cannot compute under this address-space limit (ulimit -v {} KiB): the process maps {:.0f} MiB already "
      "(libtorch), and the BLAS library maps {:.0f} MiB more at its first matrix product (it waits without end "
      "for room that never comes). Raise the limit to {} KiB or more, or remove it (ulimit -v unlimited)",
      command, address_space.rlim_cur / 1024, mapped_bytes() / kMiB, kBlasBuffersBytes / kMiB,
      static_cast<long long>((mapped_bytes() + kBlasBuffersBytes) / 1024 + 65536)));
}

void require_host_memory(const MemoryNeed& need, int replicas, double available_bytes) {
  if (available_bytes <= 0 || need.total_bytes(replicas) <= available_bytes) return;
  const std::string who = replicas > 1 ? fmt::format("{} replicas (threads of this process) need", replicas)
                                       : std::string("this replica needs");
  throw ConfigError(fmt::format(
      "{} at least {:.1f} GiB of memory, more than the {:.1f} GiB available to this process: {:.3g} parameters × 16 "
      "bytes "
      "(weights, gradients, AdamW's moments) = {:.1f} GiB, {:.1f} GiB of the strategy's copies, and {:.1f} GiB of "
      "activations per micro-batch. Lower "
      "train.micro_batch_size (the same batch in smaller pieces) or train.batch_size, data.seq_len or the model's "
      "size{}",
      who, need.total_bytes(replicas) / kGiB, available_bytes / kGiB, static_cast<double>(need.parameters),
      need.state_bytes / kGiB, need.strategy_bytes / kGiB, need.activation_bytes / kGiB,
      replicas > 1 ? ", or run the replicas as processes on several machines (dist.backend = \"gloo\")" : ""));
}

}  // namespace loco
