// Reading, overriding, completing and checking a RunConfig (docs/design.md §3 "Config and CLI").
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loco/config/run_config.h"

namespace loco {

// train.threads at most (threads of one process); loco bench's --threads and a sweep's threads too.
inline constexpr std::int64_t kMostThreads = 4096;

// Note "config-is-data": reading and checking a config never looks at the environment. The one value
// that depends on where the process runs, dist.replicas = 0 under a launcher, comes in as `world_size`
// from the caller that learned its rank (cli/cmd_train.cpp); 1 outside a launcher.

// Reads FILE.toml and applies `section.key=value` overrides in order: the config as written, with
// nothing derived or checked yet. Throws ConfigError naming the file, key and fix.
RunConfig read_run_config(const std::filesystem::path& file, const std::vector<std::string>& overrides);

// read_run_config, then complete_run_config.
RunConfig load_run_config(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                          std::int64_t world_size = 1);

// resolve_derived, then validate.
void complete_run_config(RunConfig& config, std::int64_t world_size = 1);

// For tools that use a config's model but do not train it (loco simulate, loco fit): read_run_config,
// resolve_derived, and only the [model] section checked (a plan needs no data directory or steps).
RunConfig read_config_for_planning(const std::filesystem::path& file);

// Applies one `section.key=value` assignment (the value is parsed as the key's type).
void apply_override(RunConfig& config, const std::string& assignment);

// Fills the values whose 0 means "derive it": intermediate size, KV heads, positions, replicas (1 with
// backend local, `world_size` with gloo/nccl), micro batch, steps from a token budget. Needs
// model.vocab_size to be known only for validation, not here.
void resolve_derived(RunConfig& config, std::int64_t world_size = 1);

// Throws ConfigError for the first impossible value, naming the key and the fix.
void validate(const RunConfig& config);

std::string to_toml(const RunConfig& config);
nlohmann::json to_json(const RunConfig& config);
// to_json without the keys that say only where one rank reads, writes or computes (train.out_dir, data.dir,
// train.threads, train.device: other paths on other hosts): what every rank of a run and every part of one
// checkpoint shares (note "same-config").
nlohmann::json shared_settings_json(const RunConfig& config);
// shared_settings_json without the keys that say only when or how one member of an elastic run evaluates,
// checkpoints, logs or computes (train.eval_every, …, train.micro_batch_size, train.autocast, comm.timeout_s):
// what every member of an elastic run shares (note "member-settings", membership/run_settings.h). A member
// meets the others only at synchronisations, so these may differ with its hardware or its user.
nlohmann::json member_settings_json(const RunConfig& config);
// Inverse of to_json (for checkpoints); unknown keys are errors, missing keys keep defaults.
RunConfig from_json(const nlohmann::json& json);

// The sections, then every key with its type, default and help: the text of `loco train --help-config`.
std::string describe_config_keys();

}  // namespace loco
