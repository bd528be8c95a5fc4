#include "loco/sim/gnuplot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "loco/util/error.h"
#include "loco/util/fs.h"

extern char** environ;

namespace loco::sim {

namespace {

// The gnuplot executable on PATH, or an empty path.
fs::path find_gnuplot() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    fs::path candidate = fs::path(dir) / "gnuplot";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// Runs `program -e "output = <output>" script` with stdout and stderr sent to `log`; returns the
// exit status.
int run_gnuplot(const fs::path& program, const fs::path& output, const fs::path& script, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::string program_text = program.string(), set_output = "output = " + gnuplot_quote(output.string()),
              script_text = script.string();
  std::string dash_e = "-e";
  std::vector<char*> argv = {program_text.data(), dash_e.data(), set_output.data(), script_text.data(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw Error(fmt::format("cannot start {}: {}.", program.string(), std::strerror(rc)));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error(fmt::format("waiting for gnuplot failed: {}.", std::strerror(errno)));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::string gnuplot_quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void draw_chart(const std::string& script, const fs::path& png) {
  fs::path gnuplot = find_gnuplot();
  if (gnuplot.empty()) {
    throw Error(
        fmt::format("cannot draw {}: the gnuplot program is not on PATH. Install it (Debian: "
                    "apt-get install gnuplot-nox) or leave out the chart option.",
                    png.string()));
  }
  fs::path dir = png.has_parent_path() ? png.parent_path() : fs::path(".");
  ensure_writable_directory(dir, "chart directory");
  fs::path script_path = fs::path(png).replace_extension(".gp");
  fs::path temporary_png = dir / fmt::format(".{}.tmp-{}", png.filename().string(), ::getpid());
  fs::path log = dir / fmt::format(".{}.log-{}", png.filename().string(), ::getpid());
  // The saved script draws `png` when run by hand; loco runs it with `output` set to a temporary
  // name, renamed on success, so a failed run never leaves half a PNG.
  write_file_atomic(script_path,
                    fmt::format("if (!exists(\"output\")) output = {}\n{}", gnuplot_quote(png.string()), script));
  int status = run_gnuplot(gnuplot, temporary_png, script_path, log);
  std::error_code ignored;
  if (status != 0 || !fs::exists(temporary_png)) {
    std::string messages = fs::exists(log) ? read_file(log) : "";
    while (!messages.empty() && std::isspace(static_cast<unsigned char>(messages.back()))) messages.pop_back();
    fs::remove(log, ignored);
    fs::remove(temporary_png, ignored);
    throw Error(fmt::format("gnuplot could not draw {} (exit status {}): {}. The script is in {}.", png.string(),
                            status, messages.empty() ? "no message" : messages, script_path.string()));
  }
  fs::remove(log, ignored);
  fs::rename(temporary_png, png);
}

}  // namespace loco::sim
