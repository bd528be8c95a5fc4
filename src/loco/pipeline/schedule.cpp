#include "loco/pipeline/schedule.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "loco/util/error.h"

namespace loco::pipeline {

Schedule parse_schedule(const std::string& name) {
  if (name == "fill-drain") return Schedule::fill_drain;
  if (name == "1f1b") return Schedule::one_f_one_b;
  if (name == "eager") return Schedule::eager;
  throw ConfigError(fmt::format("unknown pipeline schedule '{}'; use fill-drain (GPipe: all forwards, then all "
                                "backwards), 1f1b (one forward, one backward: less activation memory) or eager "
                                "(for slow links: hidden states and gradients cross at once)",
                                name));
}

const char* schedule_name(Schedule schedule) {
  switch (schedule) {
    case Schedule::fill_drain:
      return "fill-drain";
    case Schedule::one_f_one_b:
      return "1f1b";
    case Schedule::eager:
      return "eager";
  }
  return "?";
}

std::vector<Action> stage_actions(Schedule schedule, int stages, int stage, int micro_batches) {
  LOCO_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1, "stage {} of {}, {} micro-batches",
             stage, stages, micro_batches);
  std::vector<Action> actions;
  actions.reserve(2 * static_cast<std::size_t>(micro_batches));
  if (schedule == Schedule::fill_drain) {
    for (int j = 0; j < micro_batches; ++j) actions.push_back({Pass::forward, j});
    for (int j = micro_batches - 1; j >= 0; --j) actions.push_back({Pass::backward, j});
    return actions;
  }
  if (schedule == Schedule::eager && stage + 1 < stages) {
    for (int j = 0; j < micro_batches; ++j) actions.push_back({Pass::forward, j});
    for (int j = 0; j < micro_batches; ++j) actions.push_back({Pass::backward, j});
    return actions;
  }
  // eager's last stage is 1F1B's: no fill below it, so each backward follows its forward.
  // 1F1B: fill the pipe below this stage, then one forward and one backward at a time, then drain.
  const int fill = std::min(stages - 1 - stage, micro_batches);
  int forwarded = 0;
  int backwarded = 0;
  for (; forwarded < fill; ++forwarded) actions.push_back({Pass::forward, forwarded});
  while (forwarded < micro_batches) {
    actions.push_back({Pass::forward, forwarded++});
    actions.push_back({Pass::backward, backwarded++});
  }
  while (backwarded < micro_batches) actions.push_back({Pass::backward, backwarded++});
  return actions;
}

Timeline simulate(Schedule schedule, int micro_batches, const std::vector<double>& forward_s,
                  const std::vector<double>& backward_s, double link_s) {
  const int stages = static_cast<int>(forward_s.size());
  LOCO_CHECK(stages >= 1 && backward_s.size() == forward_s.size(), "{} forward and {} backward times", stages,
             backward_s.size());
  constexpr double kNotYet = std::numeric_limits<double>::infinity();
  // end[pass][stage][micro-batch]: when that pass finished there.
  std::vector<std::vector<std::vector<double>>> end(
      2, std::vector<std::vector<double>>(stages, std::vector<double>(micro_batches, kNotYet)));
  std::vector<std::vector<Action>> order(stages);
  for (int s = 0; s < stages; ++s) order[s] = stage_actions(schedule, stages, s, micro_batches);
  std::vector<std::size_t> next(stages, 0);
  std::vector<double> free_at(stages, 0);
  Timeline timeline;
  timeline.busy_s.assign(stages, 0);
  timeline.peak_in_flight.assign(stages, 0);
  std::vector<int> in_flight(stages, 0);
  std::size_t left = 2 * static_cast<std::size_t>(stages) * micro_batches;
  while (left > 0) {
    bool progressed = false;
    for (int s = 0; s < stages; ++s) {
      while (next[s] < order[s].size()) {
        const Action a = order[s][next[s]];
        const bool forward = a.pass == Pass::forward;
        // The input: the previous stage's forward, the next stage's backward, or (last stage) its own forward.
        double ready = 0;
        if (forward && s > 0) ready = end[0][s - 1][a.micro_batch] + link_s;
        if (!forward) ready = s + 1 < stages ? end[1][s + 1][a.micro_batch] + link_s : end[0][s][a.micro_batch];
        if (ready == kNotYet) break;
        const double took = forward ? forward_s[s] : backward_s[s];
        const double start = std::max(ready, free_at[s]);
        free_at[s] = start + took;
        end[forward ? 0 : 1][s][a.micro_batch] = free_at[s];
        timeline.busy_s[s] += took;
        in_flight[s] += forward ? 1 : -1;
        timeline.peak_in_flight[s] = std::max(timeline.peak_in_flight[s], in_flight[s]);
        ++next[s];
        --left;
        progressed = true;
      }
    }
    LOCO_CHECK(progressed, "the {} schedule deadlocks with {} stages and {} micro-batches", schedule_name(schedule),
               stages, micro_batches);
  }
  for (int s = 0; s < stages; ++s) timeline.makespan_s = std::max(timeline.makespan_s, free_at[s]);
  double busy = 0;
  for (const double b : timeline.busy_s) busy += b;
  timeline.bubble = timeline.makespan_s > 0 ? 1 - busy / (stages * timeline.makespan_s) : 0;
  return timeline;
}

}  // namespace loco::pipeline
