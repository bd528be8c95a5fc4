// Commands that the operator stops with SIGINT, SIGTERM or SIGHUP (its terminal closed): servers that run until then
// (`loco coordinator`, `loco dashboard`), and `loco train`, which stops at the next step where its replicas meet and
// writes a checkpoint first (note "graceful-stop", train/trainer_stops.cpp). The first signal calls `stop` with its
// number, once, on a thread of ours; signals may arrive on any thread (libtorch's thread pools exist before main()
// runs), so the handler only records the number and writes a byte to a pipe that this thread reads. The
// handlers in place before are restored then, so that a second signal does what it would have done without
// us (the default: end the process at once). A signal that is ignored when this starts stays ignored.
#pragma once

#include <functional>
#include <thread>

namespace loco::cli {

class StopOnSignal {
 public:
  // Installs the handlers; IoError when the pipe cannot be made.
  explicit StopOnSignal(std::function<void(int signal)> stop);
  // Restores the previous handlers (the stop thread is woken if no signal came; `stop` is not called then).
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  // The first signal received (0: none), recorded by the handler itself: a wait that the signal interrupted
  // (a system call ended with EINTR) sees it at once, before `stop` runs on the stop thread.
  int received() const;

 private:
  int pipe_[2] = {-1, -1};
  std::thread stopper_;
};

}  // namespace loco::cli
