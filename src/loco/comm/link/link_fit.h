// Note "measured-link": with comm.round_kib = auto and no configured comm.bandwidth_mbps, a group of
// processes learns its link from its own exchanges and sizes the rounds of the next ones from it (the
// rule of round_size.h with the fitted B and L), refining it as the run goes.
//
// A sample is one phase of an exchange that moved at least kMinSampleBytes: the bytes a rank sent, the
// rounds it waited through one after another, the seconds it waited, agreed among the ranks so that all
// hold the same samples (Group::learn_link): the seconds are those of the rank that arrived last, which
// did not wait for replicas that were behind. The link is the least-squares fit of
//
//     seconds = 8 · bytes / B + rounds · L
//
// to the last kSamples samples, with B > 0 and L ≥ 0. Samples that cannot tell B from L apart (the
// same rounds per byte in all of them, as in a run's first exchanges) or that ask for L < 0 give L = 0
// and B from the bytes and seconds alone. The first exchange, measured in one round, overstates the
// time of the bytes (an unpaced burst loses packets on a slow link), so the first paced rounds are
// somewhat small; they grow as paced samples replace it. A large latency shows at once: rounds sized
// without it take much longer than their bytes, the fit puts that on L, and the next rounds grow to
// keep L at 5% of a round.
//
// Note "link-stall": a phase that took more than kStallFactor times what the fit predicts is held back, not fitted:
// a link that went silent for a few seconds (TCP backing off through a dead route) is no slow link, and one such
// sample paced the rest of a run in rounds of a few KiB (measured, audit round 13: 35-60% slower to its end). A
// link that really became slower gives kStallsBeforeChange such phases in a row, which are then fitted, all of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "loco/comm/link/link_model.h"

namespace loco::comm {

struct LinkSample {
  double bytes = 0;
  double rounds = 0;
  double seconds = 0;
};

class LinkFit {
 public:
  static constexpr std::size_t kSamples = 8;
  static constexpr double kMinSampleBytes = 256 * 1024;  // smaller phases are mostly latency and overhead
  static constexpr double kStallFactor = 4;
  static constexpr std::size_t kStallsBeforeChange = 3;

  // The rounds of a phase that each paid the latency, for LinkSample::rounds: all of them when they ran
  // one after another; one when rounds were in flight together (link/round_size.h), which hide the
  // others' latency, or, where they did not quite, leave the rest in the fitted bandwidth. (Counting
  // rounds / in_flight instead would put a hidden latency on ever fewer rounds, shrink the fitted L and
  // with it the window, and swing between the two.)
  static double waited_rounds(std::int64_t rounds, int in_flight) {
    return in_flight > 1 ? 1.0 : static_cast<double>(rounds);
  }

  void add(const LinkSample& sample);
  // The fitted link; nullopt before the first sample.
  std::optional<LinkSpec> estimate() const { return estimate_; }

 private:
  void take(const LinkSample& sample);
  void refit();

  std::deque<LinkSample> samples_;
  std::vector<LinkSample> stalls_;  // slow phases in a row, held back (note "link-stall")
  std::optional<LinkSpec> estimate_;
};

}  // namespace loco::comm
