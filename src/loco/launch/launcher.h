// Starts the ranks of one node like torchrun and supervises them (docs/design.md §3 "Launch").
//
// Each rank is a child process with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR
// and MASTER_PORT set (the variables comm/c10d/rank_environment.h reads). Its stdout and stderr come back
// through pipes and are written, whole lines only, to the launcher's stdout and stderr with a
// "[rank R] " prefix.
//
// Process groups and signals: each rank runs in a process group of its own, so that
//  - the launcher can stop everything a rank started (`sh -c '…'` forks; a grandchild that kept
//    the output pipe open would otherwise outlive the run and hang the launcher);
//  - Ctrl-C in a terminal reaches only the launcher, which forwards SIGINT once to every rank
//    (in one group with the launcher, ranks would get it twice: from the terminal and forwarded).
//    A second Ctrl-C kills the ranks at once. Ranks are not in the terminal's foreground group, so
//    their stdin is /dev/null and Ctrl-Z stops only the launcher.
// SIGINT, SIGTERM and SIGHUP to the launcher are forwarded to every rank's group; ranks get
// SIGKILL if the launcher dies (PR_SET_PDEATHSIG).
//
// Failure: when a rank exits non-zero or by a signal, the launcher prints one line naming the rank
// and how it ended, sends SIGTERM to every rank's group, SIGKILL after the grace period, and
// returns the failing rank's status (128 + signal number for a signal). When every rank has exited,
// processes left in their groups get the same treatment, so that nothing outlives the run.
// Elastic runs (max_restarts >= 0; docs/fault-tolerance.md) are different: a failed rank does not stop
// the others; it is started again, as a new process (a new member of the run), up to max_restarts times
// in all, and each rank gets LOCO_MEMBER_NAME=rank-R and LOCO_RANK_START=n (its n-th process: a
// dist.churn schedule tells the lives of a rank apart by it).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace loco::launch {

struct LaunchOptions {
  int nproc = 1;   // ranks on this node
  int nnodes = 1;  // nodes in the run, each with its own launcher
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;        // 0: a free port on master_addr, found when launching (one node only)
  double grace_s = 10;            // seconds between SIGTERM and SIGKILL
  std::string program;            // what each rank executes: a path, or a name looked up in PATH
  std::vector<std::string> argv;  // the rank's command line, argv[0] first
  bool prefix_output = true;      // "[rank R] " before each line; off when only rank 0 prints
  // Elastic runs: restarts of failed ranks allowed in all; -1 for a static run (one failure stops all).
  int max_restarts = -1;
  std::vector<std::string> environment;  // NAME=VALUE set for every rank (an elastic run's coordinator)
  // Called when a rank's process ended by failing, with the rank and its start count (1 for the first
  // process): an elastic launcher tells the coordinator at once instead of waiting for a heartbeat timeout.
  std::function<void(int rank, int start, const std::string& how)> on_rank_failed;
};

// ConfigError naming the command-line option where `options` cannot be launched (launch checks this first;
// an elastic launcher checks it before it serves the run's coordinator).
void validate_launch_options(const LaunchOptions& options);

// Starts options.nproc ranks, relays their output and waits for them. Returns 0 when every rank
// exited 0, the first failing rank's status otherwise (elastic: 0 when every rank's last process
// exited 0, or at least one did and the others failed with no restarts left), and 128 + signal number
// when the launcher was stopped by SIGINT/SIGTERM/SIGHUP. Throws ConfigError for impossible options (naming the
// command-line option) and IoError when pipes or processes cannot be created.
// The launcher blocks its signals in the calling thread and reads them from a signalfd; threads that
// started earlier (libtorch's BLAS workers) do not block them, so a handler there passes any signal
// they receive on to the calling thread. Call it from one thread only.
int launch(const LaunchOptions& options);

}  // namespace loco::launch
