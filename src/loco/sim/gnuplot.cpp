#include "loco/sim/gnuplot.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/run_program.h"

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
  return run_program({program.string(), "-e", "output = " + gnuplot_quote(output.string()), script.string()},
                     {log, log, false});
}

// Whether `png` ends with the PNG's last chunk (IEND): gnuplot exits 0 when its write fails (a full disk), and
// leaves the image cut short.
bool png_is_whole(const fs::path& png) {
  static constexpr unsigned char kEnd[] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
  std::ifstream in(png, std::ios::binary);
  in.seekg(0, std::ios::end);
  if (!in || in.tellg() < static_cast<std::streamoff>(sizeof kEnd)) return false;
  in.seekg(-static_cast<std::streamoff>(sizeof kEnd), std::ios::end);
  unsigned char tail[sizeof kEnd] = {};
  in.read(reinterpret_cast<char*>(tail), sizeof tail);
  return in && std::equal(std::begin(tail), std::end(tail), std::begin(kEnd));
}

}  // namespace

std::string gnuplot_quote(const std::string& text) {
  // Single quotes: gnuplot runs a command in backquotes inside a double-quoted string (a label taken from a
  // results CSV ran a shell command), and expands nothing inside single quotes, where ' is written ''.
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') {
      out += "''";
    } else {
      // A line end would end the string, and the command, mid-label.
      out += std::iscntrl(static_cast<unsigned char>(c)) ? ' ' : c;
    }
  }
  return out + "'";
}

void draw_chart(const std::string& script, const fs::path& png) {
  const fs::path script_path = fs::path(png).replace_extension(".gp");
  std::string shown = png.string();
  const auto control = [](char c) { return std::iscntrl(static_cast<unsigned char>(c)) != 0; };
  if (std::any_of(shown.begin(), shown.end(), control)) {
    std::replace_if(shown.begin(), shown.end(), control, '?');
    throw ConfigError(
        fmt::format("the chart's path '{}' holds a control character (shown as ?: a line end, a tab): "
                    "gnuplot cannot be told that name. Choose a plain file name",
                    shown));
  }
  // Neither may replace a directory or a device (a --chart of /dev/null): refused before anything is written.
  for (const fs::path& written : {png, script_path}) require_regular_or_absent(written);
  fs::path gnuplot = find_gnuplot();
  if (gnuplot.empty()) {
    throw Error(
        fmt::format("cannot draw {}: the gnuplot program is not on PATH. Install it (Debian: "
                    "apt-get install gnuplot-nox) or leave out the chart option.",
                    png.string()));
  }
  fs::path dir = png.has_parent_path() ? png.parent_path() : fs::path(".");
  ensure_writable_directory(dir, "chart directory");
  // Created here, new, for gnuplot to write: a link planted at the predictable name beforehand is not followed
  // (gnuplot opens them by name, so in a directory another user owns they could still replace one before it
  // does). Removed on every way out; after the rename only the log was left, and it is gone too.
  fs::path temporary_png, log;
  struct Leftovers {
    const fs::path& png;
    const fs::path& log;
    ~Leftovers() {
      std::error_code ignored;
      if (!png.empty()) fs::remove(png, ignored);
      if (!log.empty()) fs::remove(log, ignored);
    }
  } leftovers{temporary_png, log};
  for (auto [stem, path] : {std::pair{".tmp-", &temporary_png}, std::pair{".log-", &log}}) {
    const int fd = create_new_file(dir, fmt::format(".{}{}", png.filename().string(), stem), *path);
    if (fd < 0) {
      const std::string failed = fmt::format("cannot create {}: {}", path->string(), std::strerror(errno));
      path->clear();  // not this process's file: left alone
      throw IoError(failed);
    }
    ::close(fd);
  }
  // The saved script draws `png` when run by hand; loco runs it with `output` set to a temporary
  // name, renamed on success, so a failed run never leaves half a PNG.
  write_file_atomic(script_path,
                    fmt::format("if (!exists(\"output\")) output = {}\n{}", gnuplot_quote(png.string()), script));
  int status = run_gnuplot(gnuplot, temporary_png, script_path, log);
  std::error_code ignored;
  if (status != 0 || fs::file_size(temporary_png, ignored) == 0 || ignored) {
    std::string messages = fs::exists(log) ? read_file(log) : "";
    while (!messages.empty() && std::isspace(static_cast<unsigned char>(messages.back()))) messages.pop_back();
    fs::remove(log, ignored);
    fs::remove(temporary_png, ignored);
    throw Error(fmt::format("gnuplot could not draw {} (exit status {}): {}. The script is in {}.", png.string(),
                            status, messages.empty() ? "no message" : messages, script_path.string()));
  }
  fs::remove(log, ignored);
  if (!png_is_whole(temporary_png)) {
    const auto written = fs::file_size(temporary_png, ignored);
    fs::remove(temporary_png, ignored);
    fs::remove(script_path, ignored);  // a full disk: nothing of the chart is left
    const fs::space_info space = fs::space(dir, ignored);
    throw IoError(
        fmt::format("gnuplot could not write all of {} ({} bytes written, without the image's end; {} has "
                    "{} bytes free): is the disk full? Free some space and run it again",
                    png.string(), written == static_cast<std::uintmax_t>(-1) ? 0 : written, dir.string(),
                    ignored ? 0 : space.available));
  }
  fsync_path(temporary_png);
  fs::rename(temporary_png, png);
}

}  // namespace loco::sim
