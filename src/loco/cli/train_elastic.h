// `loco train` as one member of an elastic run (dist.elastic = true; docs/fault-tolerance.md): joins the
// coordinator named by LOCO_COORDINATOR and LOCO_RUN_ID, and trains with the quorums it forms. Built
// with cpp-httplib only (LOCO_HAVE_MEMBERSHIP).
#pragma once

#include <optional>

#include "loco/train/trainer.h"

namespace loco::cli {

// `options.config` is complete; the strategy factory and member name are filled here. Nullopt when other
// members finished the run while this one was behind (it says so on stderr; not a failure).
std::optional<TrainSummary> run_elastic_member(TrainOptions options);

}  // namespace loco::cli
