#include "loco/cli/launch_elastic.h"

#include <fmt/format.h>

#include <cstdlib>
#include <optional>
#include <random>

#include "loco/membership/run_secret.h"
#include "loco/run/served_coordinator.h"
#include "loco/util/error.h"
#include "loco/util/print_unchecked.h"

namespace loco::cli {

int launch_elastic(launch::LaunchOptions options, const ElasticLaunchOptions& elastic) {
  options.max_restarts = elastic.max_restarts;
  launch::validate_launch_options(options);
  const char* coordinator = std::getenv("LOCO_COORDINATOR");
  if (coordinator != nullptr && *coordinator != '\0') {
    if (elastic.store_port != 0) {
      throw ConfigError(fmt::format(
          "--master-port {} has no use here: LOCO_COORDINATOR={} names the run's coordinator, whose store the "
          "ranks use (its --store-port). Leave out --master-port",
          elastic.store_port, coordinator));
    }
    // Several hosts: the ranks find the run's own coordinator through the inherited environment.
    loco::print_unchecked(stderr, "loco launch: elastic ranks of the run at coordinator {}\n", coordinator);
    return launch::launch(options);
  }
  // The coordinator below listens on 127.0.0.1: only this launch's ranks can join it.
  if (elastic.rules.min_replicas > options.nproc) {
    throw ConfigError(fmt::format(
        "--min-replicas {} is more than the {} ranks this launch starts (--nproc), and its coordinator admits no "
        "others: no quorum could ever form. Lower --min-replicas, or, for ranks on several hosts, run `loco "
        "coordinator` and give every launch LOCO_COORDINATOR (docs/fault-tolerance.md)",
        elastic.rules.min_replicas, options.nproc));
  }
  const char* given_run_id = std::getenv("LOCO_RUN_ID");
  const std::string run_id =
      given_run_id != nullptr && *given_run_id != '\0' ? given_run_id : fmt::format("run-{:08x}", std::random_device{}());
  membership::ServerOptions server_options;
  server_options.host = "127.0.0.1";
  server_options.port = 0;
  server_options.coordinator.run_id = run_id;
  server_options.coordinator.rules = elastic.rules;
  // The ranks start together: with pipeline stages N processes are N / S replicas, which only the ranks know.
  server_options.coordinator.start_members = options.nproc;
  server_options.coordinator.max_rejections = elastic.max_rejections;
  // The secret the environment gives (the ranks inherit it), or a fresh one given to the ranks in theirs
  // (docs/security.md).
  const std::optional<std::string> given_secret = membership::run_secret_from_environment();
  server_options.secret = given_secret ? *given_secret : membership::new_run_secret();
  run::ServedCoordinator served(server_options, elastic.store_port);
  membership::CoordinatorServer& server = served.server();
  server.start();
  loco::print_unchecked(stderr, "loco launch: coordinator of elastic run {} at 127.0.0.1:{}\n", run_id, server.port());
  served.show_dashboard_link("127.0.0.1", "loco launch");
  options.environment = {fmt::format("LOCO_COORDINATOR=127.0.0.1:{}", server.port()),
                         fmt::format("LOCO_RUN_ID={}", run_id)};
  if (!given_secret) options.environment.push_back(fmt::format("LOCO_RUN_SECRET={}", server_options.secret));
  // A rank's n-th process joins as "rank-R#n": the coordinator hears of its death without waiting for
  // its heartbeat to expire.
  options.on_rank_failed = [&server](int rank, int start, const std::string& how) {
    server.expel(fmt::format("rank-{}#{}", rank, start), "its process " + how);
  };
  return launch::launch(options);
}

}  // namespace loco::cli
