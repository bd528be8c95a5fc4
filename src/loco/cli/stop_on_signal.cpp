#include "loco/cli/stop_on_signal.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "loco/util/error.h"

namespace loco::cli {

namespace {

int stop_pipe_write = -1;  // one server per process
struct sigaction previous_int {}, previous_term {};

void request_stop(int) {
  const char byte = 1;
  [[maybe_unused]] const auto written = ::write(stop_pipe_write, &byte, 1);
}

}  // namespace

StopOnSignal::StopOnSignal(std::function<void()> stop) {
  if (::pipe(pipe_) != 0) throw IoError("cannot create a pipe for the signal handler (too many open files?)");
  stop_pipe_write = pipe_[1];
  struct sigaction handler {};
  handler.sa_handler = request_stop;
  ::sigemptyset(&handler.sa_mask);
  ::sigaction(SIGINT, &handler, &previous_int);
  ::sigaction(SIGTERM, &handler, &previous_term);
  stopper_ = std::thread([stop = std::move(stop), read_end = pipe_[0]] {
    char byte = 0;
    while (::read(read_end, &byte, 1) < 0 && errno == EINTR) {
    }
    stop();
  });
}

StopOnSignal::~StopOnSignal() {
  request_stop(0);  // wakes the stopper if no signal came
  stopper_.join();
  ::sigaction(SIGINT, &previous_int, nullptr);
  ::sigaction(SIGTERM, &previous_term, nullptr);
  ::close(pipe_[0]);
  ::close(pipe_[1]);
  stop_pipe_write = -1;
}

}  // namespace loco::cli
