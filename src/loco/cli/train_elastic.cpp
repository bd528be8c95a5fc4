#include "loco/cli/train_elastic.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "loco/elastic/make_elastic_strategy.h"
#include "loco/util/error.h"

namespace loco::cli {

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// LOCO_MEMBER_NAME, or host-pid: letters, digits, '.', '_' and '-' only (membership names).
std::string member_name() {
  std::string name = environment("LOCO_MEMBER_NAME");
  if (name.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    name = fmt::format("{}-{}", host, ::getpid());
  }
  for (char& c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                       c == '_' || c == '-';
    if (!plain) c = '-';
  }
  return name.substr(0, 64);
}

}  // namespace

std::optional<TrainSummary> train_as_member(TrainOptions options, const membership::MemberOptions& member_options,
                                            const std::string& backend, const MemberStepHook& after_step) {
  const RunConfig& config = options.config;
  membership::MemberClient member(member_options);
  elastic::QuorumGroupOptions group_options;
  group_options.backend = backend;
  group_options.group.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(config.comm.timeout_s * 1000));
  group_options.quorum_timeout_s = config.comm.timeout_s;
  elastic::QuorumGroup groups(member, group_options);
  // The member id ("name#n") names the member's directory, with '#' spelled '-'.
  options.member_name = member.credentials().member_id;
  std::replace(options.member_name.begin(), options.member_name.end(), '#', '-');
  options.make_strategy = [&groups, &member](const RunConfig& c, const ReplicaContext& context) {
    return elastic::make_elastic_strategy(c, context, groups, member);
  };
  if (after_step) options.after_step = [&after_step, &member](std::int64_t step) { after_step(step, member); };
  fmt::print(stderr, "loco train: member {} of elastic run {} (coordinator {}:{})\n", member.credentials().member_id,
             member_options.run_id, member_options.coordinator.host, member_options.coordinator.port);
  try {
    TrainSummary summary = Trainer(options).run();
    member.leave("finished the run", /*finished=*/true);
    return summary;
  } catch (const membership::RunFinished& e) {
    fmt::print(stderr, "loco train: member {} stops: {}\n", member.credentials().member_id, e.what());
    return std::nullopt;
  }
}

std::optional<TrainSummary> run_elastic_member(TrainOptions options) {
  const std::string address = environment("LOCO_COORDINATOR");
  const std::string run_id = environment("LOCO_RUN_ID");
  if (address.empty() || run_id.empty()) {
    throw ConfigError(
        "dist.elastic = true: set LOCO_COORDINATOR=host:port and LOCO_RUN_ID to the run's coordinator (start it "
        "with `loco coordinator --run-id ID`), or use dist.backend = \"local\" for replicas as threads of this "
        "process (docs/fault-tolerance.md)");
  }
  membership::MemberOptions member_options;
  member_options.coordinator = membership::parse_coordinator_address(address, "LOCO_COORDINATOR");
  member_options.run_id = run_id;
  member_options.name = member_name();
  const std::string backend = options.config.dist.backend;
  return train_as_member(std::move(options), member_options, backend);
}

}  // namespace loco::cli
