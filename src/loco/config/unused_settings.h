// Settings a config changes from their defaults that its run never reads: [pipeline] without stages, an
// aggregation rule's parameters under another rule, a codec's block size where nothing is quantised, another
// algorithm's key where the run's own of that name is left at its default. They are valid (one config serves
// several runs through --set, and a sweep sets the algorithm), so they are not errors; but a user who wrote
// `[diloco] sync_every = 50` for a Streaming run would otherwise train with streaming.sync_every = 100 without
// a word. `loco train` says them before it trains (cli/cmd_train.cpp) and goes on.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loco/config/run_config.h"

namespace loco {

// One sentence per reason, naming each unused key with its value and why, for example `diloco.sync_every = 50
// has no effect: dist.algorithm = "streaming" reads streaming.sync_every instead, left at its default 100`.
// Empty when every changed key is read. `config` is completed (config/load_config.h).
std::vector<std::string> unused_settings(const RunConfig& config);

// Why the key `dotted` ("diloco.outer_lr") is read by no run of `config`'s shape, whatever its value: a sweep axis
// over such a key trains the same run again for each value. Stricter than the notes for another algorithm's
// section (any key of it, counterpart or not). Nullopt when it is read, may be, or names no key.
std::optional<std::string> why_not_read(const std::string& dotted, const RunConfig& config);

}  // namespace loco
