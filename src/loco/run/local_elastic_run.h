// dist.elastic = true with dist.backend = "local" (docs/fault-tolerance.md "Simulated churn"): dist.replicas
// replicas as threads of this process, each an elastic member of a coordinator (and store) that this
// process serves on 127.0.0.1, with Gloo groups over loopback: the very code members in processes run, so
// that the algorithms can be studied under churn without processes. dist.churn's events
// (config/churn_schedule.h) make replicas leave, return and stall. Built with cpp-httplib only.
#pragma once

#include "loco/train/trainer.h"

namespace loco::run {

// The summary of the lowest-numbered replica that finished the run; the first error of a replica thread
// is rethrown once every thread has ended.
TrainSummary train_local_elastic(const TrainOptions& options);

}  // namespace loco::run
