// loco: one binary, one subcommand per job. main() is the recipe: register the subcommands, parse,
// run the chosen one, and turn errors into a one-paragraph message and an exit code.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "loco/cli/commands.h"
#include "loco/cli/usage.h"
#include "loco/util/error.h"
#include "loco/util/open_file_limit.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/stack_limit.h"
#include "loco/util/utf8.h"

namespace {

// A message names what it refuses, and a path or value can be megabytes long (a 2 MB data.dir): each word
// longer than this is shown by its two ends, so the paragraph stays readable.
constexpr std::size_t kLongestWordShown = 240;

std::string shorten_long_words(std::string_view text) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find_first_of(" \n", at), text.size());
    const std::string_view word = text.substr(at, end - at);
    if (word.size() > kLongestWordShown) {
      out += fmt::format("{}...({} characters)...{}", word.substr(0, 160), word.size(), word.substr(word.size() - 60));
    } else {
      out += word;
    }
    if (end < text.size()) out += text[end];
    at = end + 1;
  }
  return out;
}

int report(const char* kind, std::string_view message, int exit_code) {
  // A message quotes file names and values as given: their control characters are shown, not obeyed (a file
  // named with an ESC sequence or a carriage return rewrote the terminal's line).
  loco::print_unchecked(stderr, "loco: {}{}\n", kind,
                        loco::escape_control_characters(shorten_long_words(message), /*keep_line_ends=*/true));
  return exit_code;
}

int report(const char* kind, const std::exception& e, int exit_code) { return report(kind, e.what(), exit_code); }

// libtorch's errors (c10::Error) carry a backtrace after their first lines: the message is what comes before.
std::string_view without_backtrace(std::string_view text) {
  for (const std::string_view marker : {"\nException raised from", "\nframe #"}) {
    text = text.substr(0, text.find(marker));
  }
  return text;
}

// A tensor the machine cannot hold: the allocator's words (std::bad_alloc, or libtorch's CPU and CUDA
// allocators), then what the user can lower.
bool is_out_of_memory(std::string_view text) {
  return text.find("can't allocate memory") != std::string_view::npos ||
         text.find("CUDA out of memory") != std::string_view::npos || text == std::string_view("std::bad_alloc");
}

// What the command that ran out of memory lets the user lower.
std::string what_to_lower(const CLI::App& app) {
  const auto ran = app.get_subcommands();
  const std::string command = ran.empty() ? std::string() : ran.front()->get_name();
  if (command == "bench") return "Give smaller --sizes, or fewer --nproc";
  if (command == "eval") return "Give a smaller --batch-size";
  if (command == "prepare") {
    return "Give a smaller --tokenizer-sample-mb or fewer --threads, or split the corpus' longest lines or files";
  }
  return "Lower train.batch_size (or set a smaller train.micro_batch_size: the same batch in smaller pieces), "
         "data.seq_len or the model's size";
}

int report_out_of_memory(std::string_view detail, const CLI::App& app) {
  return report("error: ", fmt::format("out of memory ({}). {}", without_backtrace(detail), what_to_lower(app)), 1);
}

// Output lost on the way (a full disk behind stdout; a reader gone, SIGPIPE being handled): the output is
// what eval, generate, fit and simulate ran for, so the command failed whatever else it did. `error`: errno
// of the failed flush, 0 where an earlier write failed.
int report_lost_output(int error) {
  return report("error: ",
                fmt::format("cannot write the output to standard output{}: is the disk behind it full, or "
                            "did its reader stop reading? Send it somewhere else and run the command again",
                            error != 0 ? fmt::format(" ({})", std::strerror(error)) : ""),
                1);
}

// An exception that nothing catches, thrown on a thread of a library's (libtorch's store client when the host of
// the rendezvous store dies while it reads, "Connection reset by peer"), ends in std::terminate: said as an error
// with exit 1, where it was "terminate called after throwing…" and SIGABRT. The work since the last checkpoint is
// lost either way.
[[noreturn]] void report_uncaught() {
  std::string what = "no exception (std::terminate was called)";
  if (const std::exception_ptr thrown = std::current_exception()) {
    try {
      std::rethrow_exception(thrown);
    } catch (const std::exception& e) {
      what = without_backtrace(e.what());
    } catch (...) {
      what = "an exception that is no std::exception";
    }
  }
  report("error: ",
         fmt::format("{}, raised where nothing could handle it (on a library's thread: libtorch's store client "
                     "fails so when the rendezvous host dies). The process stops; a run resumes from its last "
                     "checkpoint",
                     what),
         1);
  std::fflush(stdout);
  std::_Exit(1);
}

// main()'s work, but for the check that its output reached stdout.
int run(CLI::App& app, int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(report_uncaught);
  CLI::App app{"loco: train language models on replicas that communicate rarely and over slow links"};
  const int status = run(app, argc, argv);
  // Commands whose result is their files (a run's checkpoints) or that serve until stopped: their output is
  // progress, and losing it fails nothing (a scheduler would run a finished training again).
  const auto ran = app.get_subcommands();
  const std::string command = ran.empty() ? std::string() : ran.front()->get_name();
  for (const char* output_is_progress : {"train", "launch", "coordinator", "dashboard", "sweep"}) {
    if (command == output_is_progress) return status;
  }
  if (std::ferror(stdout)) return status != 0 ? status : report_lost_output(0);
  if (std::fflush(stdout) != 0) return status != 0 ? status : report_lost_output(errno);
  return status;
}

namespace {

int run(CLI::App& app, int argc, char** argv) {
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
  loco::cli::add_launch_command(app, argc, argv);
  loco::cli::add_dashboard_command(app);
#ifdef LOCO_HAVE_MEMBERSHIP
  loco::cli::add_coordinator_command(app);
  loco::cli::add_status_command(app);
#endif
  loco::cli::add_bench_command(app, argc, argv);
  loco::cli::require_decimal_numbers(app);

  // A file past the size limit (ulimit -f) fails its write with EFBIG, said as such, where the default action
  // of SIGXFSZ killed the process mid-checkpoint. A handler that does nothing rather than SIG_IGN: an ignored
  // signal stays ignored in the programs loco starts (launch's ranks, gnuplot), a handler does not.
  std::signal(SIGXFSZ, [](int) {});
  // Likewise a write to a pipe whose reader is gone fails with EPIPE rather than ending the process: `loco train
  // 2>&1 | tee log` stopped by SIGHUP (an ssh session closed, tee gone with it) died of SIGPIPE writing its first
  // word about the stop, before the checkpoint the stop exists for. Progress is lost (util/print_unchecked.h); a
  // command's result is reported lost (report_lost_output).
  std::signal(SIGPIPE, [](int) {});
  try {
    // A run's store connections, Gloo pairs and files each take a descriptor: a soft limit of 1024 under a higher
    // hard one is raised before anything opens (util/open_file_limit.h); too few are refused.
    loco::require_open_file_room();
    loco::make_room_on_the_stack();  // util/stack_limit.h
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
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the system refuses outright (too long, a loop of symbolic links) where loco asked about it.
    return report("error: ",
                  fmt::format("cannot use '{}': {}. Check the path.", e.path1().string(), e.code().message()), 1);
  } catch (const std::exception& e) {
    // fmt's failed write to stdout ("cannot write to file", a std::system_error): said as what it is.
    if (dynamic_cast<const std::system_error*>(&e) != nullptr && std::ferror(stdout)) return report_lost_output(0);
    // libtorch (c10::Error) and the standard library: not expected, but never a crash.
    if (is_out_of_memory(e.what())) return report_out_of_memory(e.what(), app);
    // std::thread's constructor when no thread can start (EAGAIN: out of memory for its stack under ulimit -v,
    // or ulimit -u reached).
    const auto* system = dynamic_cast<const std::system_error*>(&e);
    if (system != nullptr && system->code() == std::errc::resource_unavailable_try_again) {
      return report("error: ",
                    fmt::format("cannot start a thread ({}): the process is out of memory for its stack (ulimit -v) "
                                "or may start no more processes and threads (ulimit -u). Raise the limit, or give "
                                "fewer --threads (train.threads, dist.replicas)",
                                e.what()),
                    1);
    }
    return report("unexpected error: ", without_backtrace(e.what()), 1);
  }
  return 0;
}

}  // namespace
