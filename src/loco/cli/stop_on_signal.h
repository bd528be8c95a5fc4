// Servers that run until the operator stops them (`loco coordinator`, `loco dashboard`): SIGINT or SIGTERM
// calls `stop` once, on a thread of ours. Signals may arrive on any thread (libtorch's thread pools exist
// before main() runs), so the handler only writes a byte to a pipe that this thread reads.
#pragma once

#include <functional>
#include <thread>

namespace loco::cli {

class StopOnSignal {
 public:
  // Installs the handlers; IoError when the pipe cannot be made.
  explicit StopOnSignal(std::function<void()> stop);
  // Restores the previous handlers (the stop thread is woken if no signal came).
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

 private:
  int pipe_[2] = {-1, -1};
  std::thread stopper_;
};

}  // namespace loco::cli
