// loco: one binary, one subcommand per job. main() is the recipe: register the subcommands, parse,
// run the chosen one, and turn errors into a one-paragraph message and an exit code.
#include <fmt/format.h>

#include <cstdio>

#include "loco/cli/commands.h"
#include "loco/cli/usage.h"
#include "loco/util/error.h"

namespace {

int report(const char* kind, const std::exception& e, int exit_code) {
  fmt::print(stderr, "loco: {}{}\n", kind, e.what());
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"loco: train language models on replicas that communicate rarely and over slow links"};
  app.require_subcommand(1);
  loco::cli::set_example(&app, "loco train --config configs/tiny.toml");
  app.fallthrough(false);
  loco::cli::add_prepare_command(app);
  loco::cli::add_train_command(app);
  loco::cli::add_eval_command(app);
  loco::cli::add_generate_command(app);
  loco::cli::add_export_command(app);
  loco::cli::add_simulate_command(app);
  loco::cli::add_fit_command(app);
  loco::cli::add_sweep_command(app);
  loco::cli::add_launch_command(app);
#ifdef LOCO_HAVE_MEMBERSHIP
  loco::cli::add_coordinator_command(app);
#endif
  loco::cli::add_bench_command(app, argc, argv);

  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command that ran others (loco launch) ends with their status
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --help-config: printed, exit 0
  } catch (const CLI::ParseError& e) {
    return loco::cli::report_usage_error(app, e);
  } catch (const loco::ConfigError& e) {
    return report("error: ", e, 2);
  } catch (const loco::Error& e) {
    return report("error: ", e, 1);
  } catch (const loco::InternalError& e) {
    return report("", e, 70);
  } catch (const std::exception& e) {
    // libtorch (c10::Error) and the standard library: not expected, but never a crash.
    return report("unexpected error: ", e, 1);
  }
  return 0;
}
