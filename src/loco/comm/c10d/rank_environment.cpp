#include "loco/comm/c10d/rank_environment.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <limits>

#include "loco/util/error.h"
#include "loco/util/host_alone.h"

namespace loco::comm {

namespace {

constexpr int kDefaultMasterPort = 29500;
constexpr const char* kFix = "(loco launch, torchrun and srun set these variables; unset them to run one process)";

// The whole of `text` as an int; nullopt for anything else (signs other than '-', spaces, overflow).
std::optional<int> parse_int(std::string_view text) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

class Environment {
 public:
  explicit Environment(const EnvLookup& lookup) : lookup_(lookup) {}

  bool has(const char* name) const { return lookup_(name) != nullptr; }

  std::optional<std::string> text(const char* name) const {
    const char* value = lookup_(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  }

  // The value of `name` as a whole number >= minimum; nullopt when unset. `meaning` completes
  // "it should be …" in the message.
  std::optional<int> integer(const char* name, int minimum, const char* meaning) const {
    auto value = text(name);
    if (!value) return std::nullopt;
    auto number = parse_int(*value);
    if (!number) {
      // A whole number beyond an int is said as such (it was "not a whole number").
      const bool too_large = !value->empty() && value->find_first_not_of("0123456789") == std::string::npos;
      throw ConfigError(fmt::format(
          "environment variable {}='{}' is {}; it should be {} {}.", name, *value,
          too_large ? fmt::format("beyond the largest number it may hold ({})", std::numeric_limits<int>::max())
                    : std::string("not a whole number"),
          meaning, kFix));
    }
    if (*number < minimum) {
      throw ConfigError(fmt::format("environment variable {}={} is below {}; it should be {} {}.", name, *number,
                                    minimum, meaning, kFix));
    }
    return number;
  }

 private:
  const EnvLookup& lookup_;
};

// The variables one source read, so that consistency errors name what the user has to change.
struct SourceNames {
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

void check_consistent(const RankEnvironment& e, const SourceNames& names) {
  if (e.rank >= e.world_size) {
    throw ConfigError(
        fmt::format("environment variable {}={} is not below {}={}: ranks count from 0, so it must be "
                    "0 to {} {}.",
                    names.rank, e.rank, names.world_size, e.world_size, e.world_size - 1, kFix));
  }
  if (e.local_world_size > e.world_size) {
    throw ConfigError(
        fmt::format("environment variable {}={} exceeds {}={}: one host cannot run more ranks than the "
                    "whole run {}.",
                    names.local_world_size, e.local_world_size, names.world_size, e.world_size, kFix));
  }
  if (e.local_rank >= e.local_world_size) {
    throw ConfigError(
        fmt::format("environment variable {}={} is not below {}={}: local ranks count from 0 on each "
                    "host {}.",
                    names.local_rank, e.local_rank, names.local_world_size, e.local_world_size, kFix));
  }
}

RankEnvironment from_torchrun_variables(const Environment& env) {
  for (auto [set, unset] : {std::pair{"RANK", "WORLD_SIZE"}, std::pair{"WORLD_SIZE", "RANK"}}) {
    if (env.has(set) && !env.has(unset)) {
      throw ConfigError(
          fmt::format("environment variable {} is set but {} is not: set both (loco launch and "
                      "torchrun do) or neither.",
                      set, unset));
    }
  }
  RankEnvironment e;
  e.source = "RANK/WORLD_SIZE environment";
  e.rank = *env.integer("RANK", 0, "this process's rank, 0 to WORLD_SIZE-1");
  e.world_size = *env.integer("WORLD_SIZE", 1, "the number of ranks in the run");
  // A hand-written environment may leave out the LOCAL_ variables: then all ranks share one host.
  e.local_rank = env.integer("LOCAL_RANK", 0, "this process's rank on its host").value_or(e.rank);
  e.local_world_size = env.integer("LOCAL_WORLD_SIZE", 1, "the number of ranks on this host").value_or(e.world_size);
  check_consistent(e, {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"});
  return e;
}

RankEnvironment from_slurm_variables(const Environment& env) {
  RankEnvironment e;
  e.source = "SLURM";
  e.rank = *env.integer("SLURM_PROCID", 0, "this task's rank, as srun sets it");
  e.world_size = *env.integer("SLURM_NTASKS", 1, "the number of tasks, as srun sets it");
  e.local_rank = env.integer("SLURM_LOCALID", 0, "this task's rank on its node, as srun sets it").value_or(e.rank);
  const char* local_world_name = "SLURM_NTASKS_PER_NODE";
  if (auto per_node = env.integer(local_world_name, 1, "the number of tasks per node, as srun sets it")) {
    e.local_world_size = *per_node;
  } else if (auto list = env.text("SLURM_TASKS_PER_NODE")) {
    local_world_name = "SLURM_TASKS_PER_NODE";
    int node = env.integer("SLURM_NODEID", 0, "this node's index in the allocation, as srun sets it").value_or(0);
    auto tasks = slurm_tasks_on_node(*list, node);
    if (!tasks) {
      throw ConfigError(
          fmt::format("environment variable SLURM_TASKS_PER_NODE='{}' does not give the tasks of node "
                      "{} (SLURM_NODEID); it should be a list such as '2(x3),1' {}.",
                      *list, node, kFix));
    }
    e.local_world_size = *tasks;
  } else {
    e.local_world_size = e.world_size;
  }
  check_consistent(e, {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", local_world_name});
  return e;
}

std::string master_address(const Environment& env, const RankEnvironment& e) {
  if (auto addr = env.text("MASTER_ADDR")) {
    if (addr->empty())
      throw ConfigError("environment variable MASTER_ADDR is empty; set it to the host or IP of rank 0.");
    return host_alone(*addr, "environment variable MASTER_ADDR", "MASTER_PORT");
  }
  for (const char* name : {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    auto list = env.text(name);
    if (!list) continue;
    auto host = first_slurm_host(*list);
    if (!host) {
      throw ConfigError(
          fmt::format("environment variable {}='{}' is not a Slurm hostlist such as "
                      "'node[01-04],gpu3'; set MASTER_ADDR to the host or IP of rank 0 instead.",
                      name, *list));
    }
    return *host;
  }
  if (e.world_size == 1) return "127.0.0.1";
  throw ConfigError(
      fmt::format("environment variable MASTER_ADDR is not set, but this process is rank {} of {} "
                  "(from the {}): set MASTER_ADDR to the host or IP of rank 0 (loco launch and torchrun "
                  "set it).",
                  e.rank, e.world_size, e.source));
}

int master_port(const Environment& env) {
  int port = env.integer("MASTER_PORT", 1, "the TCP port of rank 0's rendezvous store, 1 to 65535")
                 .value_or(kDefaultMasterPort);
  if (port > 65535) {
    throw ConfigError(
        fmt::format("environment variable MASTER_PORT={} is above 65535; it should be the TCP port of "
                    "rank 0's rendezvous store, 1 to 65535.",
                    port));
  }
  return port;
}

bool all_digits(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

// "01-04,07" and "2": items that are a number or a range of two numbers.
bool is_range_list(std::string_view ranges) {
  while (true) {
    std::size_t comma = ranges.find(',');
    std::string_view item = ranges.substr(0, comma);
    std::size_t dash = item.find('-');
    if (!all_digits(item.substr(0, dash))) return false;
    if (dash != std::string_view::npos && !all_digits(item.substr(dash + 1))) return false;
    if (comma == std::string_view::npos) return true;
    ranges.remove_prefix(comma + 1);
  }
}

}  // namespace

std::optional<RankEnvironment> rank_environment_from(const EnvLookup& lookup) {
  Environment env(lookup);
  std::optional<RankEnvironment> e;
  if (env.has("RANK") || env.has("WORLD_SIZE")) {
    e = from_torchrun_variables(env);
  } else if (env.has("SLURM_PROCID") && env.has("SLURM_NTASKS")) {
    // Both, not either: Slurm exports some of them in a batch script, which is no task launch.
    e = from_slurm_variables(env);
  } else {
    return std::nullopt;
  }
  e->master_addr = master_address(env, *e);
  e->master_port = master_port(env);
  return e;
}

std::optional<RankEnvironment> rank_environment_from_env() {
  return rank_environment_from([](const char* name) -> const char* { return std::getenv(name); });
}

std::optional<std::string> first_slurm_host(std::string_view hostlist) {
  // Host expressions are separated by commas outside brackets; each bracket is a range list, and
  // its first number gives the first host. Every expression is checked, so that a garbled list is
  // not half trusted.
  std::optional<std::string> first;
  std::size_t i = 0;
  while (true) {
    std::string host;
    while (i < hostlist.size() && hostlist[i] != ',') {
      if (hostlist[i] == ']') return std::nullopt;
      if (hostlist[i] != '[') {
        host += hostlist[i++];
        continue;
      }
      std::size_t close = hostlist.find(']', i);
      if (close == std::string_view::npos) return std::nullopt;
      std::string_view ranges = hostlist.substr(i + 1, close - i - 1);
      if (!is_range_list(ranges)) return std::nullopt;
      host += ranges.substr(0, ranges.find_first_of(",-"));
      i = close + 1;
    }
    if (host.empty()) return std::nullopt;
    if (!first) first = host;
    if (i == hostlist.size()) return first;
    ++i;  // the comma
  }
}

std::optional<int> slurm_tasks_on_node(std::string_view tasks_per_node, int node) {
  // The whole list is checked, not only up to `node`: a malformed list is not trusted at all.
  std::optional<int> found;
  long long first_node = 0;  // of the current item; the sum of K could pass INT_MAX
  while (true) {
    std::size_t comma = tasks_per_node.find(',');
    std::string_view item = tasks_per_node.substr(0, comma);
    // "N" or "N(xK)": N tasks on each of K nodes.
    std::size_t paren = item.find('(');
    std::optional<int> tasks = parse_int(item.substr(0, paren));
    std::optional<int> nodes = 1;
    if (paren != std::string_view::npos) {
      std::string_view repeat = item.substr(paren);
      if (repeat.size() < 4 || repeat.substr(0, 2) != "(x" || repeat.back() != ')') return std::nullopt;
      nodes = parse_int(repeat.substr(2, repeat.size() - 3));
    }
    if (!tasks || !nodes || *tasks < 1 || *nodes < 1) return std::nullopt;
    if (node >= first_node && node - first_node < *nodes) found = tasks;
    first_node += *nodes;
    if (comma == std::string_view::npos) return found;
    tasks_per_node.remove_prefix(comma + 1);
  }
}

}  // namespace loco::comm
