// loco coordinator [--host H] [--port P] [--store-port S] [--run-id ID] [--secret-file FILE]
//                  [--min-replicas N] [--start-replicas N] [--heartbeat-timeout-s S] [--join-window-s S]
//
// Serves a run's membership (src/loco/membership/coordinator_server.h; docs/fault-tolerance.md) and the
// run's only rendezvous store (comm/c10d/store_server.h) until SIGINT or SIGTERM. Replicas find it
// through LOCO_COORDINATOR=host:port and LOCO_RUN_ID, and prove the run's secret (docs/security.md).
#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "loco/cli/commands.h"
#include "loco/cli/quorum_options.h"
#include "loco/cli/stop_on_signal.h"
#include "loco/cli/usage.h"
#include "loco/membership/run_secret.h"
#include "loco/membership/untrusted_text.h"
#include "loco/run/served_coordinator.h"
#include "loco/train/run_directory.h"
#include "loco/util/error.h"
#include "loco/util/host_port.h"
#include "loco/util/print_unchecked.h"

namespace loco::cli {

namespace {

struct CoordinatorArgs {
  std::string host = "0.0.0.0";
  int port = 29400;
  int store_port = 0;
  std::string run_id;
  std::string secret_file;
  membership::QuorumRules rules;
  int max_rejections = membership::CoordinatorOptions{}.max_rejections;
  std::int64_t run_steps = 0;
};

// The run's secret and, when it is new, the --secret-file to write it to. The file is written only once the
// coordinator listens, so a coordinator that cannot start (a bad --host, a port in use) leaves none behind.
struct CoordinatorSecret {
  std::string secret;
  std::string file_to_create;
};

// --secret-file (a new secret when it does not exist), else LOCO_RUN_SECRET_FILE or LOCO_RUN_SECRET; a run
// without a secret is refused, naming the ways to give one.
CoordinatorSecret coordinator_secret(const std::string& secret_file) {
  if (!secret_file.empty()) {
    if (std::filesystem::exists(secret_file)) return {membership::read_secret_file(secret_file, "--secret-file"), ""};
    return {membership::new_run_secret(), secret_file};
  }
  if (auto secret = membership::run_secret_from_environment()) return {*secret, ""};
  throw ConfigError("loco coordinator needs the run's secret, which members must prove to join: --secret-file FILE "
                    "(a new secret is written there if FILE does not exist), or LOCO_RUN_SECRET_FILE / "
                    "LOCO_RUN_SECRET (docs/security.md)");
}

// LOCO_COORDINATOR_FAULT=abort:KILL, for failure tests (docs/fault-tolerance.md "Testing"): the coordinator
// SIGKILLs itself the moment it decides to abort a synchronisation, before any member can read the decision
// (note "stage-agreement": the members then presume a commit, or retry, by themselves).
void kill_on_abort_if_asked(membership::CoordinatorOptions& options) {
  const char* fault = std::getenv("LOCO_COORDINATOR_FAULT");
  if (!fault || !*fault) return;
  if (std::string(fault) != "abort:KILL") {
    throw ConfigError(
        fmt::format("LOCO_COORDINATOR_FAULT='{}': the one fault a coordinator takes is abort:KILL (it "
                    "is killed as it decides to abort a synchronisation); unset it otherwise",
                    membership::loggable(fault)));
  }
  options.on_event = [](const std::string& kind, const std::string& detail) {
    loco::print_unchecked(stderr, "{}\n", membership::loggable(fmt::format("loco coordinator: {} {}", kind, detail)));
    if (kind != "abort") return;
    loco::print_unchecked(stderr, "loco coordinator: LOCO_COORDINATOR_FAULT=abort:KILL\n");
    std::fflush(nullptr);
    std::raise(SIGKILL);
  };
}

std::string random_run_id() {
  std::random_device device;
  return fmt::format("run-{:08x}", device());
}

void run_coordinator(const CoordinatorArgs& args) {
  if (args.port != 0 && args.port == args.store_port) {
    throw ConfigError(fmt::format("--port and --store-port are both {}: the coordinator and the run's store each "
                                  "need a port of their own. Give two different ports (or 0 for any free one)",
                                  args.port));
  }
  if (args.rules.start_replicas > 0 && args.rules.start_replicas < args.rules.min_replicas) {
    throw ConfigError(
        fmt::format("--start-replicas {} is below --min-replicas {}: the first quorum waits for at least "
                    "--min-replicas members anyway. Give --start-replicas {} or more (or 0: the minimum)",
                    args.rules.start_replicas, args.rules.min_replicas, args.rules.min_replicas));
  }
  membership::ServerOptions options;
  options.host = args.host;
  options.port = args.port;
  const char* from_environment = std::getenv("LOCO_RUN_ID");
  options.coordinator.run_id =
      !args.run_id.empty() ? args.run_id : (from_environment && *from_environment ? from_environment : random_run_id());
  options.coordinator.rules = args.rules;
  options.coordinator.max_rejections = args.max_rejections;
  options.coordinator.run_steps = args.run_steps;
  kill_on_abort_if_asked(options.coordinator);
  const CoordinatorSecret secret = coordinator_secret(args.secret_file);
  if (!secret.file_to_create.empty()) {  // loco writes nothing into a data directory or a checkpoint
    refuse_data_and_checkpoint_directories(std::filesystem::absolute(secret.file_to_create).parent_path(),
                                           "--secret-file's directory");
  }
  options.secret = secret.secret;
  run::ServedCoordinator coordinator(options, args.store_port);
  if (!secret.file_to_create.empty()) {
    membership::create_secret_file(secret.file_to_create, secret.secret);
    loco::print_unchecked(stderr,
                          "loco coordinator: wrote a new run secret to {} (readable by you only); give it to the "
                          "members: LOCO_RUN_SECRET_FILE={}\n",
                          secret.file_to_create, secret.file_to_create);
  }
  membership::CoordinatorServer& server = coordinator.server();

  const StopOnSignal stop_on_signal([&server](int) { server.stop(); });
  const std::string reachable = reachable_host_port(args.host, coordinator.port());
  fmt::print("loco coordinator: run {} on {} (incarnation {}), store on port {}; status at http://{}/\n",
             options.coordinator.run_id, host_port(args.host, coordinator.port()),
             coordinator.options().coordinator.incarnation, coordinator.store_port(), reachable);
  std::fflush(stdout);
  if (!coordinator.show_dashboard_link(args.host, "loco coordinator")) {
    fmt::print("loco coordinator: members and events: loco status --coordinator {} (with the run's secret)\n",
               reachable);
  }
  server.serve();
}

}  // namespace

void add_coordinator_command(CLI::App& app) {
  auto args = std::make_shared<CoordinatorArgs>();
  CLI::App* cmd = app.add_subcommand(
      "coordinator", "Serve a run's membership: joins, heartbeats, quorums, status (docs/fault-tolerance.md)");
  set_example(cmd, "loco coordinator --port 29400 --run-id my-run --min-replicas 2");
  cmd->add_option("--host", args->host, "Address to listen on")->check(text_given())->capture_default_str();
  cmd->add_option("--port", args->port, "TCP port; 0 picks a free one (printed)")
      ->check(tcp_port())
      ->capture_default_str();
  cmd->add_option("--store-port", args->store_port,
                  "TCP port of the run's rendezvous store, on every interface; 0 picks a free one (members learn it)")
      ->check(tcp_port())
      ->capture_default_str();
  cmd->add_option("--run-id", args->run_id,
                  "The run's id, which members must present (default: LOCO_RUN_ID, or random)")
      ->check(text_given());
  cmd->add_option("--secret-file", args->secret_file,
                  "The run's secret, which members prove to join (created with a new one if missing; default: "
                  "LOCO_RUN_SECRET_FILE or LOCO_RUN_SECRET)")
      ->check(path_given());
  add_quorum_rule_options(cmd, args->rules, args->max_rejections, "");
  cmd->add_option("--steps", args->run_steps,
                  "the run's train.steps: a member claiming a later step is refused (0: not checked against the run)")
      ->check(whole_number_at_least(0));
  cmd->add_option("--start-replicas", args->rules.start_replicas,
                  "members the run's first quorum waits for, so that its replicas start together (0: min-replicas)")
      ->check(whole_number_at_least(0))
      ->capture_default_str();
  cmd->callback([args] { run_coordinator(*args); });
}

}  // namespace loco::cli
