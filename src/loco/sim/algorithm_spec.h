// Which training algorithm a simulation models, with the knobs that change its communication:
// H inner steps between synchronisations, P fragments (Streaming DiLoCo), overlap τ, and the bits
// per exchanged value. Written on the command line as `name[:key=value]...`, for example
// `streaming:tau=1:bits=4.25`; keys: h, fragments, fragment_layers, tau, bits.
#pragma once

#include <string>
#include <vector>

#include "loco/sim/scenario.h"

namespace loco::sim {

enum class Algorithm { kDataParallel, kDiLoCo, kStreaming, kNoLoCo };

struct AlgorithmSpec {
  Algorithm kind = Algorithm::kDataParallel;
  int inner_steps = 1;    // H; 1 for data parallel
  int fragments = 1;      // P; fragment p holds layers l with l mod P == p (strided)
  int overlap_steps = 0;  // τ: inner steps between sending a fragment and merging the result
  double bits = 0;        // bits per value exchanged between replicas; 0 means the scenario's
  // Which of AlgorithmDefaults the spec took: keys its kind reads that it left out. A default that no spec
  // takes is an option without effect.
  bool took_inner_steps = false, took_overlap_steps = false, took_fragment_layers = false;

  // "dp", "diloco(H=100)", "streaming(H=100,P=8,tau=1,bits=4)".
  std::string label() const;
  double exchange_bits(const Scenario& s) const { return bits > 0 ? bits : s.bits; }
};

// Values used for keys a spec leaves out.
struct AlgorithmDefaults {
  int inner_steps = 100;
  int fragment_layers = 3;  // fragments = ceil(layers / fragment_layers) unless `fragments` is given
  int overlap_steps = 0;
  double bits = 0;
};

// Parses one spec (`streaming:tau=1`) or a comma-separated list of them. Throws ConfigError naming
// the bad part and the accepted names and keys.
AlgorithmSpec parse_algorithm(const std::string& text, const AlgorithmDefaults& defaults, int layers);
std::vector<AlgorithmSpec> parse_algorithms(const std::string& comma_list, const AlgorithmDefaults& defaults,
                                            int layers);

// Throws ConfigError when the spec cannot run on the scenario (more fragments than layers, τ ≥ H…).
void validate(const AlgorithmSpec& spec, const Scenario& scenario);

// The fragment a layer belongs to, and the step offset at which that fragment synchronises:
// fragment p syncs after every step s with (s + 1) mod H == offset(p); offsets are spread evenly.
inline int fragment_of_layer(const AlgorithmSpec& a, int layer) { return layer % a.fragments; }
inline int fragment_offset(const AlgorithmSpec& a, int fragment) { return fragment * a.inner_steps / a.fragments; }
inline bool syncs_after_step(const AlgorithmSpec& a, int fragment, long step) {
  return (step + 1) % a.inner_steps == fragment_offset(a, fragment);
}

}  // namespace loco::sim
