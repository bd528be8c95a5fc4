// One function per subcommand; each lives in its own cmd_<name>.cpp and adds a CLI11 subcommand
// whose callback does the work. Errors are thrown (loco::Error) and reported by main().
#pragma once

#include <CLI/CLI.hpp>

namespace loco::cli {

void add_prepare_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_fit_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_launch_command(CLI::App& app, int argc, char** argv);
void add_dashboard_command(CLI::App& app);
// Only in builds with cpp-httplib (LOCO_HAVE_MEMBERSHIP; docs/build.md).
void add_coordinator_command(CLI::App& app);
void add_status_command(CLI::App& app);
// argv: the original command line, which `bench allreduce --backend gloo` relaunches as its ranks.
void add_bench_command(CLI::App& app, int argc, char** argv);

}  // namespace loco::cli
