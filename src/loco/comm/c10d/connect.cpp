#include "loco/comm/c10d/connect.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <net/if.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "loco/comm/c10d/c10d_group.h"
#include "loco/util/error.h"

namespace loco::comm {

namespace {

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
    // Named here, with the machine's interfaces (Gloo said "[enforce fail at …] ifa != nullptr").
    if (::if_nametoindex(value) == 0) {
      std::vector<std::string> names;
      if (struct if_nameindex* interfaces = ::if_nameindex()) {
        for (const struct if_nameindex* i = interfaces; i->if_index != 0; ++i) names.emplace_back(i->if_name);
        ::if_freenameindex(interfaces);
      }
      throw ConfigError(
          fmt::format("{}={} names no network interface of this machine (its interfaces: {}): name "
                      "the one that reaches the other ranks, or unset {}",
                      variable, value, fmt::join(names, ", "), variable));
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
