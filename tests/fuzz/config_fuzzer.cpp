// Fuzz target: a TOML config (config/load_config.h) as `loco train --config`, simulate and fit read it:
// toml11's parser and the key table, then completing and checking it, which parses its strings further
// (the churn schedule, the adversary, per-rank link values), and the TOML and JSON a run writes of it.
#include "fuzz/fuzz_support.h"
#include "loco/config/load_config.h"
#include "loco/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = loco::fuzz::write_scratch_file("fuzz.toml", loco::fuzz::as_text(data, size));
  try {
    loco::RunConfig config = loco::read_run_config(file, {});
    loco::complete_run_config(config);
    loco::to_toml(config);
    loco::to_json(config).dump();
  } catch (const loco::ConfigError&) {
  }
  return 0;
}
