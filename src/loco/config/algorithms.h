// The registry of distributed-training algorithms (dist.algorithm): one table of names that serves
// config validation, `--help-config`, the strategy factory (src/loco/algo/make_strategy.cpp switches
// on Algorithm, so the compiler names a case it misses) and the CLI.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace loco {

enum class Algorithm { none, ddp, diloco, streaming, noloco, localsgd, sparseloco };

struct AlgorithmEntry {
  Algorithm algorithm;
  const char* name;     // the value of dist.algorithm
  const char* summary;  // one line for --help-config
};

// Every algorithm, in the order help lists them.
const std::vector<AlgorithmEntry>& algorithm_registry();

// The algorithm `name` names, or nullopt.
std::optional<Algorithm> find_algorithm(const std::string& name);

// The algorithm of a validated config's dist.algorithm; InternalError when it names none (validation
// rejects unknown names first).
Algorithm algorithm_named(const std::string& name);

}  // namespace loco
