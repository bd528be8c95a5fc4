// loco status --coordinator HOST:PORT [--json] [--events N]: a running run's members and last events, read
// from its coordinator with the status token of the run's secret (LOCO_RUN_SECRET_FILE or LOCO_RUN_SECRET,
// or --secret-file), docs/fault-tolerance.md "Watching a run".
#include <fmt/format.h>

#include <optional>
#include <string>

#include "loco/cli/commands.h"
#include "loco/cli/usage.h"
#include "loco/membership/run_secret.h"
#include "loco/membership/status_client.h"
#include "loco/util/error.h"

namespace loco::cli {

namespace {

struct StatusArgs {
  std::string coordinator;
  std::string secret_file;
  bool json = false;
  std::size_t events = 10;
  double timeout_s = 5;
};

void run_status(const StatusArgs& args) {
  const auto at = membership::parse_coordinator_address(args.coordinator, "--coordinator");
  std::optional<std::string> secret = args.secret_file.empty()
                                          ? membership::run_secret_from_environment()
                                          : membership::read_secret_file(args.secret_file, "--secret-file");
  if (!secret) {
    throw ConfigError("loco status reads the run's members with the run's secret: --secret-file FILE, or "
                      "LOCO_RUN_SECRET_FILE / LOCO_RUN_SECRET as for the coordinator (docs/security.md)");
  }
  const nlohmann::json status = membership::run_status(at, *secret, args.timeout_s);
  if (args.json) {
    fmt::print("{}\n", status.dump());
  } else {
    fmt::print("{}", membership::format_status(status, args.events));
  }
}

}  // namespace

void add_status_command(CLI::App& app) {
  auto args = std::make_shared<StatusArgs>();
  CLI::App* cmd = app.add_subcommand("status", "Show a running run's members and last events, from its coordinator");
  set_example(cmd, "loco status --coordinator 127.0.0.1:29400");
  cmd->add_option("--coordinator", args->coordinator, "the coordinator's HOST:PORT")->required();
  cmd->add_option("--secret-file", args->secret_file,
                  "the run's secret (default: LOCO_RUN_SECRET_FILE / LOCO_RUN_SECRET)")
      ->check(path_given());
  CLI::Option* json = cmd->add_flag("--json", args->json, "print the coordinator's whole status as one JSON line");
  cmd->add_option("--events", args->events, "last events shown")
      ->check(whole_number_at_least(0))
      ->excludes(json);  // the JSON holds every event the coordinator keeps
  cmd->add_option("--timeout-s", args->timeout_s, "how long to wait for the coordinator")->check(number_in(0.1, 600));
  cmd->callback([args] { run_status(*args); });
}

}  // namespace loco::cli
