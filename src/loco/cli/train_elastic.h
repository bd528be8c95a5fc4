// `loco train` as one member of an elastic run (dist.elastic = true; docs/fault-tolerance.md): joins the
// coordinator named by LOCO_COORDINATOR and LOCO_RUN_ID, and trains with the quorums it forms. Built
// with cpp-httplib only (LOCO_HAVE_MEMBERSHIP).
#pragma once

#include "loco/train/trainer.h"

namespace loco::cli {

// `options.config` is complete; the strategy factory and member name are filled here.
TrainSummary run_elastic_member(TrainOptions options);

}  // namespace loco::cli
