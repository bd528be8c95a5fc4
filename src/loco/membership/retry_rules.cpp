#include "loco/membership/retry_rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "loco/util/stop_requested.h"

namespace loco::membership {

namespace {

constexpr double kFirstPauseS = 0.1;
constexpr double kLongestPauseS = 2;
// Churn fails a synchronisation a few times in a row (a member leaves while the next quorum forms, and each
// attempt may wait long for its quorum): only a failure that keeps coming back gives up.
constexpr int kLeastFailures = 10;

}  // namespace

void RetryPacing::failed(double now_s, std::string why) {
  if (failures_++ == 0) first_failure_s_ = now_s;
  last_failure_ = why.empty() ? "an attempt that was not committed" : std::move(why);
}

double RetryPacing::pause_s() const {
  if (failures_ < 2) return 0;
  return std::min(kLongestPauseS, kFirstPauseS * std::pow(2.0, std::min(failures_ - 2, 16)));
}

void RetryPacing::give_up_if_exhausted(std::int64_t step, double now_s) const {
  const double failing_s = now_s - first_failure_s_;
  if (failures_ < kLeastFailures || failing_s <= give_up_after_s_) return;
  throw GaveUpWaiting(
      fmt::format("elastic: the synchronisation at step {} failed {} times in a row over {:.0f} s, "
                  "longer than comm.timeout_s ({:g} s) allows; the last failure: {}",
                  step, failures_, failing_s, give_up_after_s_, last_failure_));
}

}  // namespace loco::membership
