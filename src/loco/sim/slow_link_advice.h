// Advice before a run: an emulated link whose time the run waits out in real time (comm.delay = "full" for the
// replicas' exchanges; always for the messages between a pipeline's stages) so slow that the run would seem to
// hang, one exchange or one step's messages lasting more than an hour. The estimate counts 32 bits per value
// on the slowest rank's link, without latency: a compressing codec shortens it by its ratio, which the
// warning says rather than models.
#pragma once

#include <optional>
#include <string>

#include "loco/config/run_config.h"

namespace loco::sim {

inline constexpr double kLongestWaitedLinkS = 3600;

// The warning for a completed config (config/load_config.h), or nothing.
std::optional<std::string> slow_link_warning(const RunConfig& config);

}  // namespace loco::sim
