#include "loco/train/replica_state.h"

#include <fmt/format.h>

#include "loco/util/error.h"
#include "loco/util/json_problem.h"

namespace loco {

namespace {

constexpr const char* kSections[] = {"model/", "optimizer/", "strategy/"};

}  // namespace

std::string encode_replica_snapshot(const CheckpointState& state, const CheckpointTensors& tensors) {
  NamedTensors all;
  const NamedTensors* parts[] = {&tensors.model, &tensors.optimizer, &tensors.strategy};
  for (std::size_t i = 0; i < 3; ++i) {
    for (const auto& [name, tensor] : *parts[i]) all.emplace_back(kSections[i] + name, tensor);
  }
  return encode_safetensors(all, {{"format", "loco-replica-snapshot"}, {"state", checkpoint_state_json(state).dump()}});
}

LoadedCheckpoint decode_replica_snapshot(const std::string& bytes, const std::string& source) {
  SafetensorsContent all = decode_safetensors(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), source);
  LoadedCheckpoint out;
  out.dir = source;
  const auto format = all.metadata.find("format");
  const auto state = all.metadata.find("state");
  if (format == all.metadata.end() || format->second != "loco-replica-snapshot" || state == all.metadata.end()) {
    throw CheckpointError(fmt::format("the state received from {} is not a loco replica snapshot", source));
  }
  try {
    out.state = checkpoint_state_from_json(nlohmann::json::parse(state->second));
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(
        fmt::format("the state received from {} has a malformed state ({})", source, json_problem(e)));
  }
  SafetensorsContent* parts[] = {&out.model, &out.optimizer, &out.strategy};
  for (std::size_t i = 0; i < 3; ++i) parts[i]->source = source;
  for (auto& [name, tensor] : all.tensors) {
    for (std::size_t i = 0; i < 3; ++i) {
      const std::string prefix = kSections[i];
      if (name.rfind(prefix, 0) == 0) parts[i]->tensors.emplace(name.substr(prefix.size()), std::move(tensor));
    }
  }
  return out;
}

}  // namespace loco
