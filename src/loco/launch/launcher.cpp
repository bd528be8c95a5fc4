#include "loco/launch/launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "loco/util/error.h"
#include "loco/util/host_alone.h"
#include "loco/util/host_port.h"
#include "loco/util/seconds_since.h"
#include "loco/util/signal_name.h"

extern char** environ;

namespace loco::launch {

namespace {

using Clock = std::chrono::steady_clock;

// The variables every rank gets; they replace any the launcher inherited.
constexpr const char* kRankVariables[] = {"RANK",        "LOCAL_RANK",  "WORLD_SIZE",      "LOCAL_WORLD_SIZE",
                                          "MASTER_ADDR", "MASTER_PORT", "LOCO_MEMBER_NAME", "LOCO_RANK_START"};
// The shell's "command not found"; a rank that cannot exec its program exits with it.
constexpr int kCannotRun = 127;
// A rank writing without newlines is passed on in pieces of this size rather than held in memory.
constexpr std::size_t kMaxLine = 1 << 16;
// After SIGKILL, how long to wait for output from processes that left their rank's process group.
constexpr auto kDrainAfterKill = std::chrono::seconds(2);
// loco's exit status for a command or config it refuses (ConfigError, a usage error): the same command fails the
// same way again, so an elastic rank that exits with it is not restarted.
constexpr int kRefusedCommand = 2;
// An elastic rank that fails again within this long of its start waits before its next start, twice as long each
// time (from kFirstPauseS to kLongestPauseS); one that ran longer starts again at once.
constexpr double kQuickFailureS = 10;
constexpr double kFirstPauseS = 0.5;
constexpr double kLongestPauseS = 30;

// Writes all of `bytes`. The launcher is the only writer to its stdout and stderr and passes on
// whole lines only, so the ranks' lines cannot interleave.
void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // our own output is gone: nowhere left to report it
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void say(std::string_view line) { write_all(STDERR_FILENO, fmt::format("loco launch: {}\n", line)); }

[[noreturn]] void throw_io(std::string_view what) {
  throw IoError(fmt::format("loco launch: cannot {}: {}.", what, std::strerror(errno)));
}

// A port that is free on `addr` now: bind port 0 and read back what the kernel chose. Rank 0 binds
// it again moments later; like torchrun, this accepts that another process could take it first.
int free_port(const std::string& addr) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(addr.c_str(), "0", &hints, &found); rc != 0) {
    throw ConfigError(fmt::format("--master-addr '{}' does not resolve ({}): give a host name or IP of this host.",
                                  addr, ::gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, ::freeaddrinfo);
  int error = 0;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    bool ok = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
              ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0;
    error = errno;
    ::close(fd);
    if (!ok) continue;
    return ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(bound).sin6_port
                                             : reinterpret_cast<const sockaddr_in&>(bound).sin_port);
  }
  throw ConfigError(
      fmt::format("--master-port 0: cannot bind a port on --master-addr '{}' ({}): give an address of "
                  "this host, or a fixed --master-port.",
                  addr, std::strerror(error)));
}

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    reset();
    fd_ = std::exchange(other.fd_, -1);
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// The thread that reads the signalfd; see redirect_to_launcher_thread.
pid_t launcher_thread_id = 0;

// libtorch's BLAS starts worker threads when loco loads, before the launcher blocks its signals, so
// the kernel may deliver a process-directed SIGCHLD or SIGINT to one of them, where it would be lost
// (SIGCHLD) or kill the process (SIGINT). This handler, which runs only in such a thread, sends the
// signal on to the launcher's thread, where it is blocked and waits for the signalfd.
void redirect_to_launcher_thread(int sig) {
  const int saved_errno = errno;
  ::syscall(SYS_tgkill, ::getpid(), launcher_thread_id, sig);
  errno = saved_errno;
}

// The signals the launcher handles, blocked and read from a signalfd, so that one poll() waits for
// output, rank exits and Ctrl-C alike.
class SignalChannel {
 public:
  SignalChannel() {
    launcher_thread_id = static_cast<pid_t>(::syscall(SYS_gettid));
    sigset_t handled;
    ::sigemptyset(&handled);
    for (int sig : kHandled) ::sigaddset(&handled, sig);
    ::sigprocmask(SIG_BLOCK, &handled, &previous_);
    // Replaces an inherited SIG_IGN for SIGCHLD too, which would have the kernel reap the ranks
    // behind our back.
    struct sigaction redirect {};
    redirect.sa_handler = redirect_to_launcher_thread;
    redirect.sa_flags = SA_RESTART;
    ::sigemptyset(&redirect.sa_mask);
    for (std::size_t i = 0; i < kHandled.size(); ++i) ::sigaction(kHandled[i], &redirect, &previous_actions_[i]);
    fd_ = Fd(::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK));
    if (fd_.get() < 0) throw_io("create a signalfd");
  }
  ~SignalChannel() {
    // Consume what is pending: unblocked, a late SIGTERM would kill us instead of letting us exit
    // with the status already decided.
    read();
    for (std::size_t i = 0; i < kHandled.size(); ++i) ::sigaction(kHandled[i], &previous_actions_[i], nullptr);
    ::sigprocmask(SIG_SETMASK, &previous_, nullptr);
  }
  SignalChannel(const SignalChannel&) = delete;
  SignalChannel& operator=(const SignalChannel&) = delete;

  int fd() const { return fd_.get(); }
  // The mask to give back to ranks before exec: they must not inherit our blocked signals.
  const sigset_t& previous_mask() const { return previous_; }

  std::vector<int> read() {
    std::vector<int> signals;
    signalfd_siginfo info{};
    while (::read(fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      signals.push_back(static_cast<int>(info.ssi_signo));
    }
    return signals;
  }

 private:
  static constexpr std::array<int, 4> kHandled{SIGCHLD, SIGINT, SIGTERM, SIGHUP};
  sigset_t previous_{};
  std::array<struct sigaction, 4> previous_actions_{};
  Fd fd_;
};

// One pipe from a rank to the launcher's stdout or stderr, passed on in whole prefixed lines.
class LineRelay {
 public:
  LineRelay() = default;
  LineRelay(Fd fd, int target, std::string prefix) : fd_(std::move(fd)), target_(target), prefix_(std::move(prefix)) {}

  bool open() const { return fd_.get() >= 0; }
  int fd() const { return fd_.get(); }

  // Reads what the pipe holds and writes its complete lines; at end of file, closes.
  void read_available() {
    char buffer[1 << 16];
    ssize_t n = ::read(fd_.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) return;
    if (n <= 0) return close();
    pending_.append(buffer, static_cast<std::size_t>(n));
    std::string lines;
    std::size_t start = 0;
    for (std::size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
      lines += prefix_;
      lines.append(pending_, start, end + 1 - start);
    }
    pending_.erase(0, start);
    if (pending_.size() >= kMaxLine) {
      lines += prefix_ + pending_ + "\n";
      pending_.clear();
    }
    write_all(target_, lines);
  }

  // Writes an unfinished last line (with a newline, so that the next line starts clean) and closes.
  void close() {
    if (!pending_.empty()) write_all(target_, prefix_ + pending_ + "\n");
    pending_.clear();
    fd_.reset();
  }

 private:
  Fd fd_;
  int target_ = -1;
  std::string prefix_;
  std::string pending_;
};

// Everything a rank needs between fork and exec, prepared before fork: only async-signal-safe calls
// are allowed in between.
struct ExecPlan {
  std::string program;
  std::vector<std::string> args, env;
  std::string cannot_run;  // the start of the message when exec fails
};

ExecPlan plan_rank(const LaunchOptions& o, int local_rank, int port, int start) {
  ExecPlan plan{o.program, o.argv, {}, fmt::format("loco launch: cannot run '{}': ", o.argv[0])};
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const char* variable : kRankVariables) replaced = replaced || name == variable;
    if (!replaced) plan.env.emplace_back(entry);
  }
  auto set = [&plan](const char* name, const auto& value) { plan.env.push_back(fmt::format("{}={}", name, value)); };
  set("RANK", o.node_rank * o.nproc + local_rank);
  set("LOCAL_RANK", local_rank);
  set("WORLD_SIZE", o.nnodes * o.nproc);
  set("LOCAL_WORLD_SIZE", o.nproc);
  set("MASTER_ADDR", o.master_addr);
  set("MASTER_PORT", port);
  for (const auto& variable : o.environment) plan.env.push_back(variable);
  if (o.max_restarts >= 0) {
    set("LOCO_MEMBER_NAME", fmt::format("rank-{}", o.node_rank * o.nproc + local_rank));
    set("LOCO_RANK_START", start);
  }
  return plan;
}

// The null-terminated array exec wants; points into `strings`.
std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// The child side of fork: become the rank, or exit kCannotRun saying why not. `stdio` are the fds
// to put at 0, 1 and 2.
[[noreturn]] void become_rank(const ExecPlan& plan, char* const* argv, char* const* envp, const int (&stdio)[3],
                              pid_t launcher, const sigset_t& mask) {
  // Die with the launcher. If it died before prctl took effect, getppid() already names another.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != launcher) ::_exit(kCannotRun);
  ::setpgid(0, 0);
  for (int fd = 0; fd < 3; ++fd) ::dup2(stdio[fd], fd);
  // The launcher's redirecting handlers mean nothing here (exec would reset them anyway, but a
  // signal could come before it).
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  ::execvpe(plan.program.c_str(), argv, envp);
  const char* reason = std::strerror(errno);
  write_all(STDERR_FILENO, plan.cannot_run);
  write_all(STDERR_FILENO, reason);
  write_all(STDERR_FILENO, "\n");
  ::_exit(kCannotRun);
}

struct Rank {
  int rank = 0;
  pid_t pid = -1;  // also the id of its process group
  bool running = false;
  int starts = 0;     // processes started for this rank (elastic runs restart failed ones)
  bool succeeded = false;  // its last process exited 0
  LineRelay out, err;
  Clock::time_point started;                    // its process's start
  int quick_failures = 0;                       // failures in a row, each within kQuickFailureS of its start
  std::optional<Clock::time_point> restart_at;  // an elastic rank that failed starts again then
};

bool failed(const siginfo_t& ended) { return !(ended.si_code == CLD_EXITED && ended.si_status == 0); }

int exit_status(const siginfo_t& ended) {
  return ended.si_code == CLD_EXITED ? ended.si_status : 128 + ended.si_status;
}

std::string describe(const siginfo_t& ended, const std::string& command) {
  if (ended.si_code != CLD_EXITED) {
    return fmt::format("was killed by {}{}", signal_name(ended.si_status),
                       ended.si_code == CLD_DUMPED ? " (core dumped)" : "");
  }
  if (ended.si_status == kCannotRun) {
    return fmt::format("exited with status {}: could not run '{}', or a command it started was not found", kCannotRun,
                       command);
  }
  return fmt::format("exited with status {}", ended.si_status);
}

// Starts the ranks, relays their output, and stops them all when one fails or the launcher is told
// to stop.
class Supervisor {
 public:
  explicit Supervisor(const LaunchOptions& options) : options_(options), ranks_(options.nproc) {}

  ~Supervisor() {
    // After run() nothing is left; after an error while starting or supervising, kill what did
    // start, so that nothing outlives the launcher.
    signal_groups(SIGKILL);
    reap();
  }

  void start(int port) {
    port_ = port;
    dev_null_ = Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (dev_null_.get() < 0) throw_io("open /dev/null");
    for (int i = 0; i < options_.nproc; ++i) start_rank(ranks_[i], i);
  }

  int run() {
    while (true) {
      bool running = false, open = false;
      for (const Rank& r : ranks_) {
        running = running || r.running || r.restart_at.has_value();
        open = open || r.out.open() || r.err.open();
      }
      if (!running && !open) break;
      // Every rank has exited; whatever is left in their process groups holds the pipes open.
      if (!running && !stopping_) stop(SIGTERM);
      auto now = Clock::now();
      if (kill_at_ && now >= *kill_at_) kill_now();
      if (!running && drain_until_ && now >= *drain_until_) break;
      std::optional<Clock::time_point> deadline = kill_at_;
      if (!deadline && !running) deadline = drain_until_;
      for (Rank& r : ranks_) {
        if (r.restart_at && now >= *r.restart_at) restart(r);
        if (r.restart_at && (!deadline || *r.restart_at < *deadline)) deadline = r.restart_at;
      }
      wait_for_events(deadline);
    }
    for (Rank& r : ranks_) {
      r.out.close();
      r.err.close();
    }
    for (LineRelay& relay : retired_) relay.close();
    reap();
    if (elastic() && !stopped_by_signal_) {
      // The run is done when its members are: every rank's last process succeeded, or some did and the
      // others failed with no restarts left.
      const bool any = std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.succeeded; });
      if (any) return 0;
    }
    return status_;
  }

 private:
  bool elastic() const { return options_.max_restarts >= 0; }

  void start_rank(Rank& r, int local_rank) {
    const int dev_null = dev_null_.get();
    r.rank = options_.node_rank * options_.nproc + local_rank;
    ExecPlan plan = plan_rank(options_, local_rank, port_, r.starts + 1);
    std::vector<char*> argv = c_strings(plan.args), envp = c_strings(plan.env);
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw_io(fmt::format("create a pipe for rank {}", r.rank));
    Fd out_read(out[0]), out_write(out[1]);
    if (::pipe2(err, O_CLOEXEC) != 0) throw_io(fmt::format("create a pipe for rank {}", r.rank));
    Fd err_read(err[0]), err_write(err[1]);
    pid_t launcher = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) throw_io(fmt::format("start rank {}", r.rank));
    if (pid == 0) {
      become_rank(plan, argv.data(), envp.data(), {dev_null, out_write.get(), err_write.get()}, launcher,
                  signals_.previous_mask());
    }
    // The child does this too; doing it here as well means a signal to the group reaches the rank
    // even if it comes before the child has run.
    ::setpgid(pid, pid);
    ++r.starts;
    r.pid = pid;
    r.running = true;
    r.started = Clock::now();
    std::string prefix = options_.prefix_output ? fmt::format("[rank {}] ", r.rank) : "";
    r.out = LineRelay(std::move(out_read), STDOUT_FILENO, prefix);
    r.err = LineRelay(std::move(err_read), STDERR_FILENO, prefix);
  }

  void wait_for_events(std::optional<Clock::time_point> deadline) {
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    std::vector<LineRelay*> relays;
    auto watch = [&](LineRelay& relay) {
      if (!relay.open()) return;
      fds.push_back({relay.fd(), POLLIN, 0});
      relays.push_back(&relay);
    };
    for (Rank& r : ranks_) {
      watch(r.out);
      watch(r.err);
    }
    for (LineRelay& relay : retired_) watch(relay);
    int timeout_ms = -1;
    if (deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      timeout_ms = static_cast<int>(std::max<decltype(left)>(left, 0));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) return;
      throw_io("wait for the ranks");
    }
    // Output first: a failing rank's last words belong before the line that reports it.
    for (std::size_t i = 0; i < relays.size(); ++i) {
      if (fds[i + 1].revents != 0) relays[i]->read_available();
    }
    if (fds[0].revents == 0) return;
    for (int sig : signals_.read()) {
      if (sig == SIGCHLD)
        collect_exits();
      else
        on_launcher_signal(sig);
    }
  }

  void collect_exits() {
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      siginfo_t ended{};
      // WNOWAIT leaves the rank a zombie until the end; its pid, which names its process group,
      // cannot be reused while we may still signal that group.
      if (::waitid(P_PID, static_cast<id_t>(r.pid), &ended, WEXITED | WNOHANG | WNOWAIT) != 0 || ended.si_pid == 0) {
        continue;
      }
      r.running = false;
      r.succeeded = !failed(ended);
      if (!failed(ended) || stopping_) continue;
      if (elastic()) {
        on_elastic_failure(r, ended);
        continue;
      }
      status_ = exit_status(ended);
      std::string line = fmt::format("rank {} {}", r.rank, describe(ended, options_.argv[0]));
      if (ranks_.size() > 1) {
        line += fmt::format("; stopping the other ranks (SIGTERM, then SIGKILL after {:g} s)", options_.grace_s);
      }
      say(line);
      stop(SIGTERM);
    }
  }

  // An elastic rank that failed: the coordinator hears of it at once, and the rank starts again as a new
  // member while restarts are left (after a pause when it fails again soon after its start); the other ranks go
  // on either way.
  void on_elastic_failure(Rank& r, const siginfo_t& ended) {
    const std::string how = describe(ended, options_.argv[0]);
    if (options_.on_rank_failed) options_.on_rank_failed(r.rank, r.starts, how);
    if (status_ == 0) status_ = exit_status(ended);
    retire(r);
    if (ended.si_code == CLD_EXITED && ended.si_status == kRefusedCommand) {
      say(
          fmt::format("rank {} {}: its command or config was refused, and would be again; not restarted; the other "
                      "ranks go on",
                      r.rank, how));
      return;
    }
    schedule_restart(r, how);
  }

  // Nothing of a failed process is kept: what it left in its process group is killed, and it is reaped at once,
  // its output draining through its own relays (before: kept as a zombie until the end, so that a rank failing
  // again and again used up the user's processes, ulimit -u, and the whole launch was killed, the healthy ranks
  // with it).
  void retire(Rank& r) {
    ::kill(-r.pid, SIGKILL);
    while (::waitpid(r.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    r.pid = -1;
    retired_.erase(
        std::remove_if(retired_.begin(), retired_.end(), [](const LineRelay& relay) { return !relay.open(); }),
        retired_.end());
    retired_.push_back(std::move(r.out));
    retired_.push_back(std::move(r.err));
  }

  void schedule_restart(Rank& r, const std::string& how) {
    if (restarts_ >= options_.max_restarts) {
      say(fmt::format("rank {} {}; not restarted (--max-restarts {} used); the other ranks go on", r.rank, how,
                      options_.max_restarts));
      return;
    }
    ++restarts_;
    r.quick_failures = seconds_since(r.started) < kQuickFailureS ? r.quick_failures + 1 : 0;
    const double pause_s =
        r.quick_failures < 2 ? 0 : std::min(kLongestPauseS, kFirstPauseS * std::ldexp(1.0, r.quick_failures - 2));
    say(fmt::format("rank {} {}; starting it again as a new member (restart {} of {}){}", r.rank, how, restarts_,
                    options_.max_restarts,
                    pause_s > 0 ? fmt::format(" in {:g} s: it failed {} times in a row soon after its start", pause_s,
                                              r.quick_failures)
                                : ""));
    r.restart_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(pause_s));
  }

  void restart(Rank& r) {
    r.restart_at.reset();
    if (stopping_) return;
    try {
      start_rank(r, r.rank - options_.node_rank * options_.nproc);
    } catch (const IoError& e) {
      // No room for another process now (ulimit -u, a cgroup's pids.max): the others go on, and this rank tries
      // again while restarts are left.
      r.started = Clock::now();
      schedule_restart(r, fmt::format("could not be started again ({})", e.what()));
    }
  }

  void on_launcher_signal(int sig) {
    if (stopping_) {
      say(fmt::format("received {} while stopping; killing the ranks now", signal_name(sig)));
      return kill_now();
    }
    status_ = 128 + sig;
    stopped_by_signal_ = true;
    say(fmt::format("received {}; passing it on to the ranks (SIGKILL after {:g} s, or at the next signal)",
                    signal_name(sig), options_.grace_s));
    stop(sig);
  }

  void stop(int sig) {
    stopping_ = true;
    for (Rank& r : ranks_) r.restart_at.reset();
    signal_groups(sig);
    kill_at_ =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.grace_s));
  }

  void kill_now() {
    signal_groups(SIGKILL);
    kill_at_.reset();
    drain_until_ = Clock::now() + kDrainAfterKill;
  }

  void signal_groups(int sig) {
    for (const Rank& r : ranks_) {
      if (r.pid > 0) ::kill(-r.pid, sig);
    }
  }

  void reap() {
    for (Rank& r : ranks_) {
      if (r.pid > 0) {
        while (::waitpid(r.pid, nullptr, 0) < 0 && errno == EINTR) {
        }
      }
      r.pid = -1;
    }
  }

  const LaunchOptions& options_;
  SignalChannel signals_;
  std::vector<Rank> ranks_;
  std::vector<LineRelay> retired_;  // output of earlier processes of restarted ranks
  Fd dev_null_;
  int port_ = 0;
  int restarts_ = 0;
  bool stopping_ = false;  // the ranks were told to stop (or have all exited)
  bool stopped_by_signal_ = false;
  std::optional<Clock::time_point> kill_at_;
  std::optional<Clock::time_point> drain_until_;
  int status_ = 0;
};

}  // namespace

void validate_launch_options(const LaunchOptions& o) {
  if (o.nproc < 1) {
    throw ConfigError(
        fmt::format("--nproc {} must be at least 1: the number of ranks to start on this node (for "
                    "example --nproc 4 for four GPUs).",
                    o.nproc));
  }
  // Each rank is a process with pipes of its own: thousands on one node exhaust its descriptors first.
  constexpr int kMostRanksPerNode = 1024;
  if (o.nproc > kMostRanksPerNode) {
    throw ConfigError(
        fmt::format("--nproc {} is more ranks than one node runs (at most {}); spread them over "
                    "nodes with --nnodes",
                    o.nproc, kMostRanksPerNode));
  }
  if (o.nnodes < 1) {
    throw ConfigError(
        fmt::format("--nnodes {} must be at least 1: the number of nodes, each running loco launch.", o.nnodes));
  }
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    throw ConfigError(
        fmt::format("--node-rank {} must be 0 to {} for --nnodes {}: number the nodes from 0, node 0 "
                    "being the one at --master-addr.",
                    o.node_rank, o.nnodes - 1, o.nnodes));
  }
  if (o.master_addr.empty()) throw ConfigError("--master-addr is empty: give the host or IP of node 0.");
  host_alone(o.master_addr, "--master-addr", "--master-port");  // refuses a port, a URL, spaces
  if (o.master_port < 0 || o.master_port > 65535) {
    throw ConfigError(fmt::format("--master-port {} must be 1 to 65535, or 0 to pick a free port.", o.master_port));
  }
  if (o.master_port == 0 && o.nnodes > 1) {
    throw ConfigError(
        "--master-port 0 picks a free port on this host, which the other nodes cannot know: give every "
        "node the same fixed --master-port.");
  }
  // A longer grace overflowed its deadline, and the ranks were killed at once, without their stop checkpoint.
  if (!(o.grace_s >= 0 && o.grace_s <= kLongestWaitSeconds)) {
    throw ConfigError(
        fmt::format("--grace-s {} must be 0 or more seconds, at most {:.0f}.", o.grace_s, kLongestWaitSeconds));
  }
  if (o.max_restarts < -1) throw ConfigError(fmt::format("--max-restarts {} must be 0 or more.", o.max_restarts));
  if (o.argv.empty() || o.program.empty()) {
    throw ConfigError(
        "no command to launch: give it after '--', for example loco launch --nproc 2 -- train --config "
        "run.toml.");
  }
}

int launch(const LaunchOptions& given) {
  validate_launch_options(given);
  LaunchOptions options = given;
  options.master_addr = host_alone(given.master_addr, "--master-addr", "--master-port");  // [::1] → ::1
  int port = options.master_port != 0 ? options.master_port : free_port(options.master_addr);
  int first = options.node_rank * options.nproc, last = first + options.nproc - 1;
  say(fmt::format("starting {} of {} (node {} of {}), master {}: {}",
                  first == last ? fmt::format("rank {}", first) : fmt::format("ranks {} to {}", first, last),
                  options.nnodes * options.nproc, options.node_rank, options.nnodes,
                  host_port(options.master_addr, port), fmt::join(options.argv, " ")));
  Supervisor supervisor(options);
  supervisor.start(port);
  return supervisor.run();
}

}  // namespace loco::launch
