// The command-line options of the quorum rules (membership/quorum_rules.h), shared by `loco coordinator`
// and `loco launch --elastic`.
#pragma once

#include <CLI/CLI.hpp>

#include "loco/membership/quorum_rules.h"

namespace loco::cli {

// --min-replicas, --heartbeat-timeout-s and --join-window-s into `rules`, --max-rejections into
// `max_rejections`; `scope` starts each help text ("--elastic: " for loco launch).
void add_quorum_rule_options(CLI::App* cmd, membership::QuorumRules& rules, int& max_rejections,
                             const std::string& scope);

}  // namespace loco::cli
