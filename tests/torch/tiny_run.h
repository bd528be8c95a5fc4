// A tiny but real training set-up for tests: a byte-level dataset prepared from generated English-ish
// text, and a config for a ~20K-parameter model that trains in well under a second per step.
#pragma once

#include <filesystem>

#include "loco/config/run_config.h"

namespace loco::test {

// Prepares a byte-tokenized dataset under `dir`/data (once per directory) and returns a resolved,
// validated config that trains on it with out_dir `dir`/`run_name`.
RunConfig tiny_run_config(const std::filesystem::path& dir, const std::string& run_name, std::int64_t steps);

}  // namespace loco::test
