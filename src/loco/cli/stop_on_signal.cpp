#include "loco/cli/stop_on_signal.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <exception>
#include <iterator>

#include "loco/util/error.h"

namespace loco::cli {

namespace {

int stop_pipe_write = -1;  // one StopOnSignal per process
std::atomic<int> received_signal{0};
constexpr int kHandled[] = {SIGINT, SIGTERM, SIGHUP};  // SIGHUP: the terminal or ssh session went away
constexpr std::size_t kCount = std::size(kHandled);
struct sigaction previous[kCount] = {};
bool installed[kCount] = {};

void restore_previous_handlers() {
  for (std::size_t i = 0; i < kCount; ++i) {
    if (installed[i]) ::sigaction(kHandled[i], &previous[i], nullptr);
  }
}

// Async-signal-safe: a lock-free store and write(2).
void request_stop(int signal) {
  int none = 0;
  received_signal.compare_exchange_strong(none, signal);
  const char byte = 1;
  [[maybe_unused]] const auto written = ::write(stop_pipe_write, &byte, 1);
}

// SIGHUP: the terminal went away (a closed ssh session), and writing to it fails from now on (EIO), which fmt
// reports by throwing: the stop and the checkpoint would end in an error. What was shown there goes nowhere
// instead, as it would anyway; output sent to files or pipes stays.
void leave_a_closed_terminal() {
  const int nowhere = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (nowhere < 0) return;
  for (const int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    if (::isatty(fd)) ::dup2(nowhere, fd);
  }
  ::close(nowhere);
}

}  // namespace

StopOnSignal::StopOnSignal(std::function<void(int)> stop) {
  if (::pipe(pipe_) != 0) throw IoError("cannot create a pipe for the signal handler (too many open files?)");
  stop_pipe_write = pipe_[1];
  received_signal = 0;
  struct sigaction handler {};
  handler.sa_handler = request_stop;
  ::sigemptyset(&handler.sa_mask);
  for (std::size_t i = 0; i < kCount; ++i) {
    // A signal ignored when we start stays ignored (a command started in the background with `&` ignores
    // SIGINT: the terminal's Ctrl-C is not meant for it).
    ::sigaction(kHandled[i], nullptr, &previous[i]);
    installed[i] = previous[i].sa_handler != SIG_IGN;
    if (installed[i]) ::sigaction(kHandled[i], &handler, nullptr);
  }
  stopper_ = std::thread([stop = std::move(stop), read_end = pipe_[0]] {
    char byte = 0;
    while (::read(read_end, &byte, 1) < 0 && errno == EINTR) {
    }
    const int signal = received_signal.load();
    if (signal == 0) return;  // woken by the destructor
    restore_previous_handlers();
    if (signal == SIGHUP) leave_a_closed_terminal();
    try {
      stop(signal);
    } catch (const std::exception&) {
      // Saying that the run stops failed (its output is gone): it stops all the same.
    }
  });
}

int StopOnSignal::received() const { return received_signal.load(); }

StopOnSignal::~StopOnSignal() {
  request_stop(0);  // wakes the stopper if no signal came
  stopper_.join();
  restore_previous_handlers();
  ::close(pipe_[0]);
  ::close(pipe_[1]);
  stop_pipe_write = -1;
}

}  // namespace loco::cli
