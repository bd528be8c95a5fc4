// `loco launch --elastic`: the ranks of an elastic run (docs/fault-tolerance.md). Unless LOCO_COORDINATOR
// already names one (a run on several hosts), the launcher serves the run's coordinator and store itself,
// tells it at once when a rank's process dies, and starts failed ranks again as new members.
// launch_elastic is built with cpp-httplib only (LOCO_HAVE_MEMBERSHIP; the options are always there).
#pragma once

#include "loco/launch/launcher.h"
#include "loco/membership/coordinator.h"
#include "loco/membership/quorum_rules.h"

namespace loco::cli {

struct ElasticLaunchOptions {
  int max_restarts = 3;
  membership::QuorumRules rules;  // the first quorum also waits for every rank started (start_members = --nproc)
  int max_rejections = membership::CoordinatorOptions{}.max_rejections;
  int store_port = 0;  // --master-port where given: the port of the run's store; 0: a free one
};

// Runs the ranks as launch::launch does; returns the launcher's status.
int launch_elastic(launch::LaunchOptions options, const ElasticLaunchOptions& elastic);

}  // namespace loco::cli
