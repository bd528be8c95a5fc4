#include "loco/comm/c10d/connect.h"

#include <cstdlib>

#include "loco/comm/c10d/c10d_group.h"

namespace loco::comm {

std::unique_ptr<Group> connect_from_environment(const RankEnvironment& environment, const std::string& backend,
                                                const GroupOptions& options, Timeout rendezvous_timeout) {
  C10dOptions c10d;
  c10d.backend = backend;
  c10d.rank = environment.rank;
  c10d.world_size = environment.world_size;
  c10d.master_addr = environment.master_addr;  // never empty: rank_environment_from_env resolves it
  c10d.master_port = environment.master_port;
  for (const char* variable : {"LOCO_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}) {
    const char* value = std::getenv(variable);
    if (value != nullptr && *value != '\0' && c10d.interface.empty()) c10d.interface = value;
  }
  c10d.rendezvous_timeout = rendezvous_timeout;
  c10d.cuda_device = environment.local_rank;
  c10d.group = options;
  return make_c10d_group(c10d);
}

}  // namespace loco::comm
