// Who am I in a multi-process run: the rank, world size and rendezvous address a process reads from
// its environment before it joins a c10d group (PyTorch's env:// rendezvous), in the conventions of
// the launchers people already use (docs/design.md §3 "Launch"; `loco launch` in src/loco/launch sets them):
//   torchrun / loco launch / by hand: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
//                                     MASTER_PORT
//   Slurm (srun):                     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
//                                     SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE, and the first
//                                     host of SLURM_JOB_NODELIST (or SLURM_NODELIST) as the master
// RANK/WORLD_SIZE win over Slurm's variables: under `srun torchrun …` the Slurm ones describe the
// torchrun agent, not the worker.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace loco::comm {

struct RankEnvironment {
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
  std::string master_addr;  // host or IP of rank 0's rendezvous store
  int master_port = 29500;
  std::string source;  // "RANK/WORLD_SIZE environment" or "SLURM", for messages
};

// Returns the value of an environment variable, or nullptr when it is not set (like std::getenv).
using EnvLookup = std::function<const char*(const char*)>;

// The rank environment `lookup` describes; nullopt when the process was not started as one rank of
// several (no RANK/WORLD_SIZE and no SLURM_PROCID/SLURM_NTASKS). Throws ConfigError naming the
// variable and the fix when a value is malformed or inconsistent (not a number, negative,
// rank >= world size, port out of range, MASTER_ADDR missing when WORLD_SIZE > 1 and no Slurm
// node list to take it from).
std::optional<RankEnvironment> rank_environment_from(const EnvLookup& lookup);

// rank_environment_from over this process's environment.
std::optional<RankEnvironment> rank_environment_from_env();

// The first host of a Slurm hostlist: "node[01-04,07],gpu3" -> "node01", "rack[2]-n[5-6]" ->
// "rack2-n5" (ranges keep their zero padding). nullopt when `hostlist` is empty or malformed
// anywhere (unbalanced or nested brackets, an empty host, a range that is not numbers).
std::optional<std::string> first_slurm_host(std::string_view hostlist);

// The number of tasks on node `node` (0-based) of a Slurm tasks-per-node list such as "2(x3),1"
// (three nodes with 2 tasks, then one with 1). nullopt when malformed or `node` is past its end.
std::optional<int> slurm_tasks_on_node(std::string_view tasks_per_node, int node);

}  // namespace loco::comm
