// A progress line on stderr for the long passes of `loco prepare`: how much of the input is done, the
// rate in MB/s and the time left, at most every few seconds (a short pass prints nothing). Lines, not
// a carriage-return display, so logs of unattended runs stay readable.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "loco/util/seconds_since.h"

namespace loco::data {

class ProgressLine {
 public:
  // `total_bytes`: what the pass will read (file sizes on disk), the base of the share and the ETA.
  ProgressLine(std::string what, std::uint64_t total_bytes);

  // Prints when the last line is more than the interval old. `text_bytes`: the documents' bytes as read
  // (decompressed), shown beside the files' share, since a compressed corpus may expand a thousandfold.
  void update(std::uint64_t done_bytes, std::uint64_t text_bytes, std::uint64_t documents);

  double seconds() const { return seconds_since(start_); }

 private:
  std::string what_;
  std::uint64_t total_bytes_;
  SteadyClock::time_point start_;
  double last_print_ = 0;
};

// A line every `every_s` seconds while a step that says nothing itself runs (sentencepiece's training, which
// takes minutes on text without spaces): "prepare: WHAT: N s so far; HINT". Stops when destroyed.
class PeriodicNotice {
 public:
  PeriodicNotice(std::string what, std::string hint, double every_s);
  ~PeriodicNotice();
  PeriodicNotice(const PeriodicNotice&) = delete;
  PeriodicNotice& operator=(const PeriodicNotice&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable finished_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace loco::data
