#include "loco/data/progress_line.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "loco/util/print_unchecked.h"

namespace loco::data {

namespace {

constexpr double kIntervalSeconds = 5;

std::string duration(double seconds) {
  auto whole = static_cast<std::uint64_t>(std::llround(seconds));
  if (whole < 60) return fmt::format("{} s", whole);
  if (whole < 3600) return fmt::format("{}:{:02} min", whole / 60, whole % 60);
  return fmt::format("{}:{:02}:{:02} h", whole / 3600, whole / 60 % 60, whole % 60);
}

}  // namespace

ProgressLine::ProgressLine(std::string what, std::uint64_t total_bytes)
    : what_(std::move(what)), total_bytes_(total_bytes), start_(SteadyClock::now()) {}

void ProgressLine::update(std::uint64_t done_bytes, std::uint64_t text_bytes, std::uint64_t documents) {
  const double elapsed = seconds();
  if (elapsed - last_print_ < kIntervalSeconds) return;
  last_print_ = elapsed;
  const double rate = static_cast<double>(done_bytes) / elapsed;
  const double share = total_bytes_ == 0 ? 1 : std::min(1.0, static_cast<double>(done_bytes) / total_bytes_);
  const double left = rate > 0 ? static_cast<double>(total_bytes_ - std::min(done_bytes, total_bytes_)) / rate : 0;
  loco::print_unchecked(
      stderr,
      "prepare: {}: {:.0f} of {:.0f} MB of files ({:.0f}%), {:.1f} MB/s, {} documents of {:.0f} MB of text, about "
      "{} left\n",
      what_, done_bytes / 1e6, total_bytes_ / 1e6, 100 * share, rate / 1e6, documents, text_bytes / 1e6,
      duration(left));
}

PeriodicNotice::PeriodicNotice(std::string what, std::string hint, double every_s)
    : thread_([this, what = std::move(what), hint = std::move(hint), every_s] {
        const auto start = SteadyClock::now();
        std::unique_lock lock(mutex_);
        while (!finished_.wait_for(lock, std::chrono::duration<double>(every_s), [this] { return done_; })) {
          loco::print_unchecked(stderr, "prepare: {}: {} so far; {}\n", what, duration(seconds_since(start)), hint);
        }
      }) {}

PeriodicNotice::~PeriodicNotice() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  finished_.notify_all();
  thread_.join();
}

}  // namespace loco::data
