// Deterministic faults for failure tests and chaos runs (docs/fault-tolerance.md "Testing"), asked for
// through the environment like LOCO_PROFILE (a diagnostic, not part of a run's definition):
//   LOCO_FAULT=STEP:KILL        this process SIGKILLs itself right after optimizer step STEP (kill -9, OOM)
//   LOCO_FAULT=STEP:STOP        ... SIGSTOPs itself (a hang: every thread stops, heartbeats too)
//   LOCO_FAULT=NAME@STEP:KILL   only the process whose LOCO_MEMBER_NAME is NAME (one rank of `loco launch
//                               --elastic`, which names its ranks rank-R)
#pragma once

#include <cstdint>
#include <memory>

namespace loco {

class FaultInjection {
 public:
  // Null when LOCO_FAULT is unset or names another member; ConfigError naming the variable and the
  // form when it is malformed.
  static std::unique_ptr<FaultInjection> from_environment();
  void after_step(std::int64_t step) const;

 private:
  FaultInjection(std::int64_t step, int signal) : step_(step), signal_(signal) {}
  std::int64_t step_;
  int signal_;
};

}  // namespace loco
