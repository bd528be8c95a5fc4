#include "loco/algo/overlap_auto.h"

#include <algorithm>
#include <cmath>

#include "loco/comm/group.h"
#include "loco/comm/link/traffic.h"

namespace loco {

namespace {
constexpr double kMargin = 1.1;           // note "overlap-auto"
constexpr double kExchangeOverBound = 1.4;  // note "overlap-auto", first exchanges
}

std::optional<std::int64_t> overlap_to_hide(const ExchangeTiming& timing, std::int64_t most) {
  if (!(timing.step_s > 0)) return std::nullopt;
  const double steps = std::ceil(kMargin * std::max(timing.exchange_s, 0.0) / timing.step_s);
  // Compared as doubles first: an exchange of hours against a step of microseconds must not overflow.
  if (steps >= static_cast<double>(most)) return most;
  return std::max<std::int64_t>(static_cast<std::int64_t>(steps), 1);
}

std::int64_t next_overlap(const ExchangeTiming& timing, std::int64_t current, std::int64_t most) {
  const auto hide = overlap_to_hide(timing, most);
  return hide ? std::max(*hide, current - 1) : current;
}

ExchangeTiming timing_across(comm::Group& group, const ExchangeTiming& mine) {
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  auto local = torch::tensor({mine.exchange_s, mine.step_s}, options).to(group.device());
  auto all = torch::empty({2 * group.size()}, options.device(group.device()));
  group.all_gather(local, all);
  const auto rows = all.to(torch::kCPU).view({group.size(), 2});
  return {rows.select(1, 0).min().item<double>(), rows.select(1, 1).max().item<double>()};
}

std::optional<double> predicted_exchange_seconds(std::int64_t bytes, int group_size,
                                                 const std::optional<MeasuredExchange>& measured,
                                                 const comm::LinkModel& link) {
  if (measured && measured->bytes > 0) {
    return measured->exchange_s * static_cast<double>(bytes) / static_cast<double>(measured->bytes);
  }
  if (!(link.slowest_bandwidth_bps() > 0)) return std::nullopt;
  return kExchangeOverBound *
         link.collective_seconds(comm::ring_all_reduce_traffic(static_cast<std::uint64_t>(bytes), group_size));
}

double StepDurations::median() const {
  if (seconds_.empty()) return 0;
  std::vector<double> sorted = seconds_;
  auto middle = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
  std::nth_element(sorted.begin(), middle, sorted.end());
  return *middle;
}

double StepDurations::take_median() {
  const double median_s = median();
  seconds_.clear();
  return median_s;
}

}  // namespace loco
