#include "loco/elastic/elastic_ddp.h"

#include <fmt/format.h>

#include "loco/algo/outer_state_io.h"
#include "loco/algo/replica_mean.h"
#include "loco/elastic/state_digest.h"
#include "loco/model/weights.h"
#include "loco/train/replica_state.h"

namespace loco::elastic {

ElasticDdp::ElasticDdp(const ReplicaContext& context, QuorumMembership& membership, std::uint64_t windows_per_step)
    : context_(context), member_(membership.member()), windows_per_step_(windows_per_step) {}

std::string ElasticDdp::describe() const {
  return fmt::format("ddp (elastic): fp32 gradient mean over the quorum every step, in one exchange, member {}",
                     member_.member_id());
}

void ElasticDdp::attach(Llama& model, const FlatParameters& parameters) {
  named_parameters_ = model_parameters(model);  // views: they follow every update and adopted state
  parameters_ = &parameters;
}

// The first quorum: the run starts (every member at step 0), this member joins a run in progress and takes
// a live member's state before it computes its first gradient, or the members resume a run from
// checkpoints (note "elastic-resume": each goes on from its own data position).
void ElasticDdp::begin() {
  member_.synchronise([this] { return context_.replica->step(); },
                      [this](comm::Group& group, const membership::QuorumReply& quorum) {
    if (quorum.step == 0) {
      start_round(quorum);
    } else {
      replaced_ = member_.heal(group, named_parameters_, SnapshotSection::model).this_member;
    }
    return true;
  });
}

void ElasticDdp::after_backward() {
  // The step being taken: after a heal, the donor's.
  member_.synchronise([this] { return context_.replica->step() + 1; },
                      [this](comm::Group& group, const membership::QuorumReply& quorum) {
    const std::int64_t step = context_.replica->step() + 1;
    const HealOutcome healed = member_.heal(group, named_parameters_, SnapshotSection::model);
    replaced_ = replaced_ || healed.this_member;
    if (healed.anyone()) return false;  // a member that had only just started computes its gradient meanwhile
    member_.before_exchange();
    torch::Tensor mean = gradients();
    replica_mean(group, mean, nullptr, replaced_ ? 0.0 : 1.0);
    const std::optional<membership::CommitReply> decision = member_.vote(quorum.quorum_id, step, candidate_hash(mean));
    if (!decision) return false;  // refused: nothing committed
    if (decision->outcome != membership::Outcome::commit) {  // nothing applied; the next quorum retries
      member_.aborted(step, decision->reason);
      return false;
    }
    if (!decision->outliers.empty()) {
      member_.heal(group, named_parameters_, SnapshotSection::model, membership::ReplicasAlike::yes,
                   /*check_alike=*/true);
    }
    set_gradients(mean);
    ++commits_;
    replaced_ = false;
    start_round(quorum);
    return true;
  });
}

torch::Tensor ElasticDdp::gradients() const {
  std::vector<torch::Tensor> parts;
  for (std::size_t g = 0; g < parameters_->groups(); ++g) {
    parts.push_back(parameters_->buffer(g).grad().to(torch::kCPU, torch::kFloat32));
  }
  return torch::cat(parts);  // a copy: an abandoned all-reduce may still write into it
}

void ElasticDdp::set_gradients(const torch::Tensor& flat) {
  std::int64_t offset = 0;
  for (std::size_t g = 0; g < parameters_->groups(); ++g) {
    torch::Tensor gradient = parameters_->buffer(g).grad();
    gradient.copy_(flat.narrow(0, offset, gradient.numel()));
    offset += gradient.numel();
  }
}

std::string ElasticDdp::candidate_hash(const torch::Tensor& mean) const {
  NamedTensors hashed;
  for (std::size_t g = 0; g < parameters_->groups(); ++g) {
    hashed.emplace_back(fmt::format("parameters/{}", g), parameters_->buffer(g));
  }
  hashed.emplace_back("mean_gradient", mean);
  return state_digest(hashed);
}

void ElasticDdp::start_round(const membership::QuorumReply& quorum) {
  context_.replica->seek_data(rounds_.start(quorum.members.size(), quorum.rank, windows_per_step_));
}

void ElasticDdp::add_log_fields(nlohmann::json& record) {
  record["commits"] = commits_;
  member_.log().add_fields_to(record);
}

nlohmann::json ElasticDdp::state_json() const {
  nlohmann::json json = {{"commits", commits_}};
  rounds_.save_to(json);
  return json;
}

void ElasticDdp::load_state(const SafetensorsContent& tensors, const nlohmann::json& json) {
  commits_ = saved_outer_integer(json, "commits", tensors);
  rounds_.load_from(json, tensors);
}

}  // namespace loco::elastic
