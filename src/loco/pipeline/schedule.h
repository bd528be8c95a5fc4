// The order in which each pipeline stage runs the forward and backward passes of one batch's micro-batches,
// and what that order costs in time and memory (docs/pipeline.md).
//
// A replica split into S stages holds a contiguous block of layers per stage; a micro-batch's forward runs
// stage 0 → S−1 and its backward S−1 → 0, each stage sending activations (forward) or their gradients
// (backward) to its neighbour. Two schedules, both computing the same gradients (a sum over micro-batches):
//   fill_drain   (GPipe) every forward in order, then every backward, the last micro-batch first;
//                every stage holds the activations of all m micro-batches at its peak.
//   one_f_one_b  (1F1B, PipeDream-flush) stage s first runs min(S − 1 − s, m) forwards, then alternates one
//                forward and one backward, then runs the backwards left; it holds at most S − s.
//   eager        for slow links: every stage but the last runs its m forwards, then its m backwards in
//                order; the last runs each backward right after its forward. Hidden states stream forward
//                while gradients stream back, both directions of each link busy at once, where fill-drain
//                sends every gradient after every hidden state and 1F1B lets a stage run only S − s
//                micro-batches ahead of their gradients (a round trip per micro-batch on a slow link).
//                Holds all m micro-batches' activations on every stage but the last, as fill-drain does.
// With equal times per stage and no link time all leave the same idle fraction, the bubble
// (S − 1) / (m + S − 1): 1F1B saves memory, not time.
#pragma once

#include <string>
#include <vector>

namespace loco::pipeline {

enum class Schedule { fill_drain, one_f_one_b, eager };

// "fill-drain", "1f1b" or "eager"; ConfigError naming them otherwise.
Schedule parse_schedule(const std::string& name);
const char* schedule_name(Schedule schedule);

enum class Pass { forward, backward };

struct Action {
  Pass pass;
  int micro_batch;
  bool operator==(const Action& other) const { return pass == other.pass && micro_batch == other.micro_batch; }
};

// The actions of `stage` (0 ≤ stage < stages) for `micro_batches` ≥ 1, in the order it runs them: each
// micro-batch's forward once and its backward once, the forward first.
std::vector<Action> stage_actions(Schedule schedule, int stages, int stage, int micro_batches);

// One batch through the pipeline when stage s's forward of a micro-batch takes forward_s[s] seconds, its
// backward backward_s[s], and a message to a neighbour link_s (sent in the background: the sender goes on).
// Each stage runs its actions in order, each as soon as its input has arrived.
struct Timeline {
  double makespan_s = 0;             // from the first forward's start to the last backward's end
  std::vector<double> busy_s;        // per stage: seconds spent computing
  double bubble = 0;                 // 1 − Σ busy / (stages · makespan): the idle fraction
  std::vector<int> peak_in_flight;   // per stage: most micro-batches forwarded and not yet backwarded
};
Timeline simulate(Schedule schedule, int micro_batches, const std::vector<double>& forward_s,
                  const std::vector<double>& backward_s, double link_s);

}  // namespace loco::pipeline
