// The input of the utilisation simulator and of the analytic wall-clock model: one model, the
// compute time of one inner step, R workers grouped in M replicas, and two links (inside a replica
// and between replicas). docs/algorithm-reference.md §3 (wall-clock model) and §4 (utilisation simulator).
#pragma once

namespace loco::sim {

// A network link as one worker sees it: bits per second, and seconds added to every collective.
struct Link {
  double bandwidth_bps = 0;
  double latency_s = 0;
};

struct Scenario {
  double params = 0;                 // N: values exchanged by a full synchronisation
  int layers = 0;                    // L: transformer blocks; N is spread evenly over them
  double step_time_s = 0;            // compute of one inner step (forward + backward) on one worker
  double forward_share = 1.0 / 3.0;  // forward's share of a step; backward splits the rest equally
                                     // between activation gradients and weight gradients
  int workers = 2;                   // R
  int replicas = 2;                  // M; R / M workers per replica
  double bits = 16;                  // bits per value exchanged, unless an algorithm overrides it
  Link inter;                        // between replicas (the slow link)
  Link intra;                        // between the workers of one replica
};

// The links the simulator models: 1 kbit/s to 1 Ebit/s, far below and far above any real link. The bandwidth
// search looks within them, and a link outside them is refused: beyond them the times computed leave double's
// range (a subnormal bandwidth made every transfer infinitely long and printed "-nan%").
inline constexpr double kMinBandwidthBps = 1e3;
inline constexpr double kMaxBandwidthBps = 1e18;

// Throws ConfigError naming the first impossible value and the option that sets it. The
// inter-replica bandwidth is checked on its own: the bandwidth search varies it.
void validate(const Scenario& scenario);
void validate_inter_bandwidth(double bandwidth_bps);
// The same check on a bandwidth as the user gave it, in Gbit/s, before it is converted to bit/s (where
// 1e300 Gbit/s would already be infinite): `which` names the link, `example` shows the option that sets it.
void validate_bandwidth_gbps(double gbps, const char* which, const char* example);

// Workers per replica (R / M).
inline int workers_per_replica(const Scenario& s) { return s.workers / s.replicas; }

}  // namespace loco::sim
