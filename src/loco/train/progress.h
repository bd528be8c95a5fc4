// Progress on the terminal: a bar redrawn in place when stderr is a TTY, plain lines otherwise
// (logs, CI), so the same run reads well in both.
#pragma once

#include <cstdint>
#include <string>

namespace loco {

class Progress {
 public:
  explicit Progress(std::int64_t total_steps);
  // Called every logged step; `status` is the text after the bar ("loss 4.21 lr 3e-4 …").
  void update(std::int64_t step, double elapsed_s, double steps_per_s, const std::string& status);
  // A line that must stay visible (evaluations, checkpoints): clears the bar first.
  void note(const std::string& line);
  void finish();

 private:
  std::int64_t total_;
  bool tty_;
  bool bar_visible_ = false;
};

std::string format_duration(double seconds);  // "1h02m", "3m05s", "12.3s"

}  // namespace loco
