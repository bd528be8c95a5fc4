#include "loco/elastic/stage_agreement.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "loco/comm/comm_error.h"
#include "loco/comm/group.h"

namespace loco::elastic {

AttemptEnd replica_end(const std::vector<AttemptEnd>& stages) {
  const bool all_done = std::all_of(stages.begin(), stages.end(), [](AttemptEnd e) { return e == AttemptEnd::done; });
  return all_done ? AttemptEnd::done : AttemptEnd::retry;
}

StageAgreement::StageAgreement(comm::Group& stages) : stages_(stages) {}

void StageAgreement::open_attempt() {
  open_ = true;
  settled_.reset();
}

AttemptEnd StageAgreement::settle(AttemptEnd mine) {
  if (broken_) throw comm::CommError(*broken_);
  if (open_ && settled_) return *settled_;
  const std::int64_t number = ++settlements_;
  // Each stage's (settlement number, end).
  const torch::Tensor sent = torch::tensor({number, static_cast<std::int64_t>(mine)}, torch::kInt64);
  const torch::Tensor all = torch::empty({2 * stages_.size()}, torch::kInt64);
  try {
    stages_.all_gather(sent, all);
  } catch (const comm::CommError& e) {
    broken_ =
        fmt::format("the stages of this pipeline replica could not agree how the synchronisation ended ({})", e.what());
    throw comm::CommError(*broken_);
  }
  const auto* values = all.data_ptr<std::int64_t>();
  std::vector<AttemptEnd> ends;
  std::vector<int> retrying;
  for (int stage = 0; stage < stages_.size(); ++stage) {
    const std::int64_t theirs = values[2 * stage], end = values[2 * stage + 1];
    if (theirs != number || (end != 0 && end != 1)) {
      broken_ = fmt::format(
          "stage {} of this pipeline replica is at its settlement {} of a synchronisation, "
          "stage {} at {}: the stages are out of step",
          stage, theirs, stages_.rank(), number);
      throw comm::CommError(*broken_);
    }
    ends.push_back(static_cast<AttemptEnd>(end));
    if (end == 1) retrying.push_back(stage);
  }
  retrying_ = fmt::format("{}", fmt::join(retrying, ", "));
  const AttemptEnd replica = replica_end(ends);
  if (open_) settled_ = replica;
  return replica;
}

void StageAgreement::close_attempt(bool done) {
  settle(done ? AttemptEnd::done : AttemptEnd::retry);
  open_ = false;
  settled_.reset();
}

}  // namespace loco::elastic
