#include "loco/cli/quorum_options.h"

#include "loco/cli/usage.h"
#include "loco/util/seconds_since.h"

namespace loco::cli {

void add_quorum_rule_options(CLI::App* cmd, membership::QuorumRules& rules, int& max_rejections,
                             const std::string& scope) {
  cmd->add_option("--min-replicas", rules.min_replicas, scope + "fewest members a quorum may have")
      ->check(whole_number_at_least(1))
      ->capture_default_str();
  // Bounded as every wait of a run (comm.timeout_s): 1e300 s was taken as it was.
  cmd->add_option("--heartbeat-timeout-s", rules.heartbeat_timeout_s,
                  scope + "a member silent this long has left the run")
      ->check(positive_number())
      ->check(number_in(0, kLongestWaitSeconds))
      ->capture_default_str();
  cmd->add_option("--join-window-s", rules.join_window_s,
                  scope + "how long a quorum waits for members that are not back yet")
      ->check(number_in(0, kLongestWaitSeconds))
      ->capture_default_str();
  cmd->add_option("--max-rejections", max_rejections,
                  scope + "remove a member whose pseudo-gradients held NaN or Inf in this many synchronisations "
                          "(robust dist.aggregation; 0: never)")
      ->check(whole_number_at_least(0))
      ->capture_default_str();
}

}  // namespace loco::cli
