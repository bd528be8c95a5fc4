// Deterministic faults for failure tests and chaos runs (docs/fault-tolerance.md "Testing"), asked for
// through the environment like LOCO_PROFILE (a diagnostic, not part of a run's definition):
//   LOCO_FAULT=STEP:KILL          this process SIGKILLs itself right after optimizer step STEP (kill -9, OOM)
//   LOCO_FAULT=STEP:STOP          ... SIGSTOPs itself (a hang: every thread stops, heartbeats too)
//   LOCO_FAULT=exchanging:KILL    ... at its first outer exchange, when the others are already in the
//                                 all-reduce (elastic runs; STOP works too)
//   LOCO_FAULT=donating:KILL      ... while sending its state to a member that heals, after the header and
//                                 before the first chunk (elastic runs; STOP works too)
//   LOCO_FAULT=receiving:KILL     ... as it starts receiving the state it heals with (elastic runs; STOP
//                                 works too)
//   LOCO_FAULT=donating:CORRUPT   the first chunk of the first state it sends leaves with one byte flipped
//                                 after its hash was taken (a link or memory error the receivers must catch)
//   LOCO_FAULT=NAME@...           only the process whose LOCO_MEMBER_NAME is NAME (one rank of `loco launch
//                                 --elastic`, which names its ranks rank-R)
// Each fault fires once per process, and only in a rank's first process (LOCO_RANK_START unset or 1): a rank
// that `loco launch --elastic` started again plays none.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

namespace loco {

// Points inside an elastic synchronisation where a fault can fire.
enum class FaultMoment { exchanging, donating, receiving };

class FaultInjection {
 public:
  // Null when LOCO_FAULT is unset or names another member; ConfigError naming the variable and the
  // forms when it is malformed.
  static std::unique_ptr<FaultInjection> from_environment();
  // Raises the signal when the fault is STEP:KILL or STEP:STOP for this step.
  void after_step(std::int64_t step) const;
  // At `moment`: raises the signal when the fault names it with KILL or STOP; returns true (once) when it
  // names it with CORRUPT: the caller corrupts what it sends.
  bool at(FaultMoment moment);

 private:
  enum class Action { kill, stop, corrupt };
  FaultInjection(std::optional<std::int64_t> step, std::optional<FaultMoment> moment, Action action)
      : step_(step), moment_(moment), action_(action) {}
  std::optional<std::int64_t> step_;
  std::optional<FaultMoment> moment_;
  Action action_;
  bool fired_ = false;
};

}  // namespace loco
