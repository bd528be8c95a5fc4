// A member of an elastic test run (tests/membership/runs/elastic_groups_test.cpp starts several): joins the
// coordinator, and for each round asks for a quorum, all-reduces a 1 over the quorum's group and prints
// what it saw. A member behind its quorum's step (it joined late) catches up to it, as a healed replica
// would. A group that fails, or whose quorum breaks, is abandoned and the round is retried with the next
// quorum. Faults are injected by the member itself in a given round, after the round's quorum formed
// and before its collective, so that the others are inside that collective when it goes:
//   --die-at R    SIGKILL (as kill -9, preemption, OOM): the others' all-reduce fails at once
//   --stop-at R   SIGSTOP (a hang: the heartbeat thread stops too): the others give the all-reduce up when
//                 the coordinator says the quorum broke; the driver kills the stopped process at the end
//   --die-building-at R  SIGKILL once the round's quorum formed, before its group is built: the others
//                 wait for it at the group's rendezvous until the coordinator says the quorum broke
//
//   loco_elastic_worker --coordinator HOST:PORT --run-id ID --name NAME --rounds N
//                       [--die-at R | --stop-at R | --die-building-at R]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>

#include "loco/comm/comm_error.h"
#include "loco/elastic/quorum_group.h"
#include "loco/membership/run_secret.h"
#include "loco/util/seconds_since.h"

namespace {

const auto kStart = loco::SteadyClock::now();

double seconds_since_start() { return loco::seconds_since(kStart); }

}  // namespace

int main(int argc, char** argv) {
  std::string coordinator, run_id, name;
  int rounds = 0, die_at = -1, stop_at = -1, die_building_at = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--coordinator") coordinator = value;
    if (key == "--run-id") run_id = value;
    if (key == "--name") name = value;
    if (key == "--rounds") rounds = std::stoi(value);
    if (key == "--die-at") die_at = std::stoi(value);
    if (key == "--stop-at") stop_at = std::stoi(value);
    if (key == "--die-building-at") die_building_at = std::stoi(value);
  }
  torch::set_num_threads(1);
  try {
    loco::membership::MemberOptions member_options;
    member_options.coordinator = loco::membership::parse_coordinator_address(coordinator, "--coordinator");
    member_options.run_id = run_id;
    member_options.name = name;
    member_options.secret = loco::membership::run_secret_from_environment().value_or("");
    loco::membership::MemberClient member(member_options);
    loco::elastic::QuorumGroupOptions options;
    options.group.timeout = std::chrono::seconds(10);  // what an abandoned group's destruction may take
    options.rendezvous_timeout = std::chrono::seconds(20);
    options.quorum_timeout_s = 60;
    loco::elastic::QuorumGroup groups(member, options);
    for (int round = 1; round <= rounds; ++round) {
      for (int attempt = 1;; ++attempt) {
        try {
          if (round == die_building_at) {
            member.await_quorum(round, 60);
            std::raise(SIGKILL);
          }
          loco::comm::Group& group = groups.join_quorum(round);
          round = std::max<int>(round, static_cast<int>(groups.quorum().step));
          if (round == die_at) std::raise(SIGKILL);
          if (round == stop_at) std::raise(SIGSTOP);
          torch::Tensor one = torch::ones({1});
          group.all_reduce(one, loco::comm::ReduceOp::sum);
          std::printf("round %d quorum %lld size %d sum %g at %.3f s\n", round,
                      static_cast<long long>(groups.quorum().quorum_id), group.size(), one.item<double>(),
                      seconds_since_start());
          std::fflush(stdout);
          break;
        } catch (const loco::comm::CommError& e) {
          std::printf("round %d attempt %d abandoned at %.3f s: %s\n", round, attempt, seconds_since_start(), e.what());
          std::fflush(stdout);
          groups.abandon();
        }
      }
    }
    std::printf("done\n");
  } catch (const std::exception& e) {
    std::printf("failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
