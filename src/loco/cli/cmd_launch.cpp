// `loco launch`: start N ranks of a command on this node like torchrun, each with RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set; relay their output prefixed by
// rank; stop them all when one fails (src/loco/launch/launcher.h; docs/cli.md "loco launch").
#include <fmt/format.h>

#include <memory>
#include <string_view>

#include "loco/cli/commands.h"
#include "loco/cli/launch_elastic.h"
#include "loco/cli/quorum_options.h"
#include "loco/cli/usage.h"
#include "loco/launch/launcher.h"
#include "loco/util/error.h"

namespace loco::cli {

namespace {

struct LaunchArgs {
  launch::LaunchOptions launch;
  bool elastic = false;
  ElasticLaunchOptions elastic_options;
};

ConfigError not_a_launch_option(const std::string& option) {
  return ConfigError(
      fmt::format("loco launch has no option {}: put the command to launch, with its options, after "
                  "'--' (for example loco launch --nproc 2 -- train --config run.toml).",
                  option));
}

// The command's options given before the "--" (loco launch --nproc 2 --config run.toml -- train): CLI11 then
// blamed the command's first word, which was in its place ("The following argument was not expected: train").
void refuse_command_options_before_separator(const CLI::App& cmd, int argc, char** argv) {
  int at = 1;
  while (at < argc && cmd.get_name() != argv[at]) ++at;
  for (++at; at < argc && std::string_view(argv[at]) != "--"; ++at) {
    const std::string_view word = argv[at];
    if (word.rfind("--", 0) != 0) continue;  // a value, or a short option CLI11 names itself
    const std::string name(word.substr(0, word.find('=')));
    if (name != "--help" && cmd.get_option_no_throw(name) == nullptr) throw not_a_launch_option(name);
  }
}

void run_launch(LaunchArgs args, const std::vector<std::string>& command, const CLI::App& cmd) {
  launch::LaunchOptions& options = args.launch;
  // allow_extras() lets us say this instead of CLI11's "arguments were not expected". CLI11 keeps
  // the "--" that ends our options among the extras.
  for (const std::string& extra : cmd.remaining()) {
    if (extra != "--") throw not_a_launch_option(extra);
  }
  if (!command.empty()) {
    const CLI::App& loco = *cmd.get_parent();
    bool subcommand = !loco.get_subcommands([&](const CLI::App* s) { return s->check_name(command[0]); }).empty();
    // A loco subcommand runs this very binary: /proc/self/exe stays right even if the file on
    // disk is replaced while the ranks start.
    options.program = subcommand ? "/proc/self/exe" : command[0];
    options.argv = command;
    if (subcommand) options.argv.insert(options.argv.begin(), loco.get_name());
  }
  // The options of an elastic launch (their help begins "--elastic:") do nothing without it: said, not ignored.
  if (!args.elastic) {
    for (const CLI::Option* option : cmd.get_options()) {
      if (option->count() > 0 && option->get_description().rfind("--elastic:", 0) == 0) {
        throw ConfigError(
            fmt::format("{} applies to an elastic launch only: add --elastic (and train --set "
                        "dist.elastic=true), or drop {}",
                        option->get_name(), option->get_name()));
      }
    }
  }
  int status = 0;
  if (args.elastic) {
    // The ranks reach the store through the coordinator, which serves it on --master-port where given.
    if (cmd.count("--master-port") > 0) args.elastic_options.store_port = options.master_port;
#ifdef LOCO_HAVE_MEMBERSHIP
    status = launch_elastic(options, args.elastic_options);
#else
    throw ConfigError("loco launch --elastic needs a loco built with cpp-httplib (install libcpp-httplib-dev and "
                      "rebuild; docs/build.md)");
#endif
  } else {
    status = launch::launch(options);
  }
  // The ranks' status becomes ours; CLI::RuntimeError carries it through main() without a message.
  if (status != 0) throw CLI::RuntimeError(status);
}

}  // namespace

void add_launch_command(CLI::App& app, int argc, char** argv) {
  auto args = std::make_shared<LaunchArgs>();
  auto command = std::make_shared<std::vector<std::string>>();
  auto& o = args->launch;
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Start ranks of a command on this node like torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT "
      "set), prefix their output with the rank and stop them all when one fails (docs/cli.md)");
  set_example(cmd, "loco launch --nproc 4 -- train --config run.toml");
  cmd->add_option("--nproc", o.nproc, "Ranks to start on this node (e.g. one per GPU)")->capture_default_str();
  cmd->add_option("--nnodes", o.nnodes, "Nodes in the run, each running loco launch")->capture_default_str();
  cmd->add_option("--node-rank", o.node_rank, "This node's index, 0 to nnodes-1; its ranks are node-rank*nproc + i")
      ->capture_default_str();
  cmd->add_option("--master-addr", o.master_addr, "Host or IP of node 0, where rank 0 runs the rendezvous store")
      ->capture_default_str();
  cmd->add_option("--master-port", o.master_port, "TCP port of the rendezvous store; 0 picks a free one (one node)")
      ->capture_default_str();
  cmd->add_option("--grace-s", o.grace_s, "Seconds between SIGTERM and SIGKILL when stopping the ranks")
      ->check(finite_number())
      ->capture_default_str();
  cmd->add_flag("--elastic", args->elastic,
                "Elastic run (docs/fault-tolerance.md): serve its coordinator (unless LOCO_COORDINATOR names one), "
                "start failed ranks again as new members; use with train --set dist.elastic=true");
  cmd->add_option("--max-restarts", args->elastic_options.max_restarts,
                  "--elastic: failed ranks started again, in all")
      ->check(whole_number_at_least(0))
      ->capture_default_str();
  add_quorum_rule_options(cmd, args->elastic_options.rules, args->elastic_options.max_rejections, "--elastic: ");
  cmd->add_option("command", *command,
                  "After --: a loco subcommand with its arguments (runs this binary), or a program on PATH");
  cmd->allow_extras();
  cmd->footer(
      "Examples:\n"
      "  loco launch --nproc 4 -- train --config run.toml\n"
      "  loco launch --nnodes 2 --node-rank 0 --master-addr node0 --nproc 8 -- train --config run.toml\n"
      "  loco launch --nproc 2 -- python3 script.py\n"
      "  loco launch --elastic --nproc 4 --max-restarts 3 -- train --config run.toml --set dist.elastic=true\n"
      "A rank that fails stops the others (SIGTERM, SIGKILL after --grace-s); loco launch exits with its status.\n"
      "With --elastic a failed rank is started again as a new member while the others go on.\n");
  cmd->preparse_callback([cmd, argc, argv](std::size_t) { refuse_command_options_before_separator(*cmd, argc, argv); });
  cmd->callback([args, command, cmd] { run_launch(*args, *command, *cmd); });
}

}  // namespace loco::cli
