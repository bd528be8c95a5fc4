#include "loco/sim/slow_link_advice.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "loco/sim/collective_cost.h"
#include "loco/sim/model_size.h"
#include "loco/util/parse_number.h"

namespace loco::sim {

namespace {

// The slowest emulated link of `ranks` in Mbit/s; 0 where none is emulated.
double slowest_mbps(const std::string& bandwidth_mbps, int ranks) {
  double slowest = 0;
  for (const double mbps : parse_per_rank_values(bandwidth_mbps, "bandwidth (Mbit/s)", ranks)) {
    if (mbps > 0 && (slowest == 0 || mbps < slowest)) slowest = mbps;
  }
  return slowest;
}

std::string in_hours(double seconds) {
  return seconds >= 48 * 3600 ? fmt::format("{:.0f} days", seconds / 86400) : fmt::format("{:.1f} hours", seconds / 3600);
}

}  // namespace

std::optional<std::string> slow_link_warning(const RunConfig& c) {
  std::vector<std::string> slow;
  const int replicas = static_cast<int>(c.dist.replicas);
  if (c.comm.delay == "full" && replicas > 1 && c.dist.algorithm != "none") {
    if (const double mbps = slowest_mbps(c.comm.bandwidth_mbps, replicas); mbps > 0) {
      // Before the data named it, the vocabulary is unknown: the blocks alone are a lower bound.
      const ParamConvention counted = c.model.vocab_size > 0 ? ParamConvention::kTotal : ParamConvention::kNonEmbedding;
      const double values = count_parameters(c.model, counted, "the run's config");
      const double seconds = ring_allreduce(values, 32, replicas, Link{mbps * 1e6, 0}).busy_s;
      if (seconds > kLongestWaitedLinkS) {
        slow.push_back(fmt::format("one exchange of the model's {:.3g} values among {} replicas takes about {} at "
                                   "comm.bandwidth_mbps = {}, waited out because comm.delay = \"full\"",
                                   values, replicas, in_hours(seconds), c.comm.bandwidth_mbps));
      }
    }
  }
  const int stages = static_cast<int>(c.dist.stages);
  if (stages > 1) {
    if (const double mbps = slowest_mbps(c.pipeline.bandwidth_mbps, stages); mbps > 0) {
      // Each micro-batch's activations go forward and their gradients come back over every stage's link.
      const double message_bits =
          32.0 * static_cast<double>(c.train.micro_batch_size * c.data.seq_len * c.model.hidden_size);
      const double seconds = 2.0 * static_cast<double>(c.accumulation_steps()) * message_bits / (mbps * 1e6);
      if (seconds > kLongestWaitedLinkS) {
        slow.push_back(fmt::format("one step's activations and gradients between stages take about {} at "
                                   "pipeline.bandwidth_mbps = {} (always waited out)",
                                   in_hours(seconds), c.pipeline.bandwidth_mbps));
      }
    }
  }
  if (slow.empty()) return std::nullopt;
  return fmt::format("{}: the run will seem to hang (a compressing codec shortens this by its ratio). Emulate a "
                     "faster link; for the replicas' exchanges, comm.delay = \"none\" counts the emulated time "
                     "without waiting for it (docs/slow-links.md)",
                     fmt::join(slow, "; "));
}

}  // namespace loco::sim
