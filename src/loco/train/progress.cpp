#include "loco/train/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "loco/util/print_unchecked.h"

namespace loco {

Progress::Progress(std::int64_t total_steps) : total_(total_steps), tty_(::isatty(STDERR_FILENO) == 1) {}

std::string format_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  // An emulated clock on a link of a few bits per second counts past what an integer of seconds holds.
  if (!(seconds < 1e12)) return fmt::format("{:.3g} h", seconds / 3600);
  auto s = static_cast<std::int64_t>(seconds);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

void Progress::update(std::int64_t step, double elapsed_s, double steps_per_s, const std::string& status) {
  const double eta = steps_per_s > 0 ? static_cast<double>(total_ - step) / steps_per_s : 0.0;
  if (!tty_) {
    loco::print_unchecked(stderr, "step {}/{} {} elapsed {} eta {}\n", step, total_, status, format_duration(elapsed_s),
                          format_duration(eta));
    return;
  }
  constexpr int kWidth = 24;
  const int filled = total_ > 0 ? static_cast<int>(kWidth * step / total_) : kWidth;
  loco::print_unchecked(stderr, "\r\033[K[{}{}] {}/{} {} eta {}", std::string(filled, '#'),
                        std::string(kWidth - filled, ' '), step, total_, status, format_duration(eta));
  std::fflush(stderr);
  bar_visible_ = true;
}

void Progress::note(const std::string& line) {
  if (bar_visible_) loco::print_unchecked(stderr, "\r\033[K");
  loco::print_unchecked(stderr, "{}\n", line);
  bar_visible_ = false;
}

void Progress::finish() {
  if (bar_visible_) loco::print_unchecked(stderr, "\n");
  bar_visible_ = false;
}

}  // namespace loco
