#include "loco/algo/overlap_auto.h"

#include <algorithm>
#include <cmath>

#include "loco/comm/group.h"

namespace loco {

namespace {
constexpr double kMargin = 1.1;  // note "overlap-auto"
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

double StepDurations::take_median() {
  if (seconds_.empty()) return 0;
  auto middle = seconds_.begin() + static_cast<std::ptrdiff_t>(seconds_.size() / 2);
  std::nth_element(seconds_.begin(), middle, seconds_.end());
  const double median = *middle;
  seconds_.clear();
  return median;
}

}  // namespace loco
