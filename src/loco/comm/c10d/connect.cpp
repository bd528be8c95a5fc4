#include "loco/comm/c10d/connect.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "loco/comm/c10d/c10d_group.h"
#include "loco/util/error.h"
#include "loco/util/tcp_connect.h"

namespace loco::comm {

namespace {

// Each interface of this machine with an IPv4 or IPv6 address, and its first such address.
std::vector<std::pair<std::string, std::string>> interface_addresses() {
  std::vector<std::pair<std::string, std::string>> found;
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return found;
  for (const ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    if (std::any_of(found.begin(), found.end(), [&](const auto& f) { return f.first == i->ifa_name; })) continue;
    found.emplace_back(i->ifa_name, numeric_address(*i->ifa_addr));
  }
  ::freeifaddrs(all);
  return found;
}

C10dOptions c10d_options(const RankEnvironment& environment, const std::string& backend, const GroupOptions& options,
                         Timeout rendezvous_timeout) {
  C10dOptions c10d;
  c10d.backend = backend;
  c10d.rank = environment.rank;
  c10d.world_size = environment.world_size;
  c10d.master_addr = environment.master_addr;  // never empty: rank_environment_from_env resolves it
  c10d.master_port = environment.master_port;
  // Gloo's interface; NCCL finds its own, and a cluster's setting for Gloo is no error of an NCCL run.
  for (const char* variable : {"LOCO_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}) {
    const char* value = std::getenv(variable);
    if (backend != "gloo" || value == nullptr || *value == '\0' || !c10d.interface.empty()) continue;
    // Named here, with the machine's interfaces that Gloo can bind (Gloo said "[enforce fail at …] ifa != nullptr").
    const std::vector<std::pair<std::string, std::string>> usable = interface_addresses();
    if (std::none_of(usable.begin(), usable.end(), [&](const auto& i) { return i.first == value; })) {
      std::vector<std::string> listed;
      for (const auto& [name, address] : usable) listed.push_back(fmt::format("{} ({})", name, address));
      const std::string problem = ::if_nametoindex(value) == 0
                                      ? "names no network interface of this machine"
                                      : "names an interface without an IP address (down, or not configured)";
      throw ConfigError(
          fmt::format("{}={} {} (its interfaces with an address: {}): name the one that reaches the "
                      "other ranks, or unset {}",
                      variable, value, problem, fmt::join(listed, ", "), variable));
    }
    c10d.interface = value;
  }
  c10d.rendezvous_timeout = rendezvous_timeout;
  c10d.cuda_device = environment.local_rank;
  c10d.group = options;
  return c10d;
}

}  // namespace

std::unique_ptr<Group> connect_from_environment(const RankEnvironment& environment, const std::string& backend,
                                                const GroupOptions& options, Timeout rendezvous_timeout) {
  return make_c10d_group(c10d_options(environment, backend, options, rendezvous_timeout));
}

PipelineGroups connect_pipeline_groups(std::unique_ptr<Group> world, const RankEnvironment& environment,
                                       const std::string& backend, int stages, const GroupOptions& pipeline_options,
                                       const GroupOptions& stage_options, Timeout rendezvous_timeout) {
  PipelineGroups groups;
  groups.world = std::move(world);
  const int replica = environment.rank / stages;
  const int stage = environment.rank % stages;
  C10dOptions pipeline = c10d_options(environment, backend, pipeline_options, rendezvous_timeout);
  pipeline.rank0_serves_store = false;  // the world group's rank 0 serves it
  pipeline.store_prefix = fmt::format("pipeline_{}/", replica);
  pipeline.rank = stage;
  pipeline.world_size = stages;
  groups.pipeline = make_c10d_group(pipeline);
  C10dOptions across = c10d_options(environment, backend, stage_options, rendezvous_timeout);
  across.rank0_serves_store = false;
  across.store_prefix = fmt::format("stage_{}/", stage);
  across.rank = replica;
  across.world_size = environment.world_size / stages;
  groups.stage = make_c10d_group(across);
  return groups;
}

}  // namespace loco::comm
