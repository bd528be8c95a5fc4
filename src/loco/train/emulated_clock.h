// Note "emulated-wall-clock": the time a replica's training would take on its own machine behind the
// emulated link (comm.bandwidth_mbps, comm.latency_ms), reported as `sim_wall_s` in metrics.
//
// The clock advances with the replica's compute time and with communication it had to wait for:
// an exchange started at emulated time t0 that the link model charges d seconds ends at t0 + d, and
// waiting for it moves the clock to max(now, t0 + d). So communication that overlaps compute (DDP
// buckets during backward, Streaming DiLoCo's τ steps) costs only what it does not hide.
// Compute time is the process's CPU time divided by the replicas it runs when every replica computes
// with one intra-op thread on the CPU (simulated replicas sharing this machine's cores each count
// their share of the work, whatever else runs), and wall time minus time blocked on communication
// otherwise. Replicas are assumed equally fast: a collective is not charged for waiting on a slower
// peer, and replicas of one process are charged equal shares.
#pragma once

#include <functional>

namespace loco::comm {
class Group;
}

namespace loco {

class EmulatedClock {
 public:
  // `compute_seconds` returns the replica's compute time so far (monotone).
  explicit EmulatedClock(std::function<double()> compute_seconds);

  // Emulated seconds since training started.
  double now() const;
  // A wait on something that ends at emulated time `t`.
  void wait_until(double t);
  // Compute done from here until the returned guard ends (evaluation, checkpoints) is not training time.
  class Pause {
   public:
    explicit Pause(EmulatedClock& clock);
    ~Pause();
    Pause(const Pause&) = delete;
    Pause& operator=(const Pause&) = delete;

   private:
    EmulatedClock& clock_;
    double started_;
  };

 private:
  std::function<double()> compute_seconds_;
  double offset_ = 0;  // waiting added, paused compute removed
};

// The compute time source of a replica (the second paragraph above): the process's CPU time shared
// among its `local_replicas` when every replica computes on one core of the CPU (`single_cpu_thread`:
// one intra-op thread, one BLAS thread per call), wall time since now minus the group's blocked time
// otherwise. Not the replica
// thread's own CPU time: BLAS may compute on threads of its own (measured: a single replica's main
// thread showed a third of the CPU time of the same work on a replica thread).
std::function<double()> replica_compute_seconds(const comm::Group* group, bool single_cpu_thread,
                                                int local_replicas);

}  // namespace loco
