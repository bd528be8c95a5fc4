#include "loco/elastic/round_layout.h"

#include <fmt/format.h>

#include "loco/algo/outer_state_io.h"

namespace loco::elastic {

std::uint64_t RoundLayout::start(std::size_t members, int rank, std::uint64_t windows) {
  start_ += members_ * windows_;
  return restart(members, rank, windows);
}

std::uint64_t RoundLayout::restart(std::size_t members, int rank, std::uint64_t windows) {
  members_ = members;
  windows_ = windows;
  return start_ + static_cast<std::uint64_t>(rank) * windows_;
}

bool RoundLayout::holds_inside(std::size_t members, int rank, std::uint64_t window) const {
  const std::uint64_t first = start_ + static_cast<std::uint64_t>(rank) * windows_;
  return members == members_ && rank >= 0 && window > first && window < first + windows_;
}

std::string RoundLayout::describe() const {
  return fmt::format("round from window {} for {} members of {} windows", start_, members_, windows_);
}

void RoundLayout::save_to(nlohmann::json& json) const {
  json["round_start"] = start_;
  json["round_members"] = members_;
  json["round_windows"] = windows_;
}

void RoundLayout::load_from(const nlohmann::json& json, const SafetensorsContent& tensors) {
  start_ = static_cast<std::uint64_t>(saved_outer_integer(json, "round_start", tensors));
  members_ = static_cast<std::uint64_t>(saved_outer_integer(json, "round_members", tensors));
  windows_ = static_cast<std::uint64_t>(saved_outer_integer(json, "round_windows", tensors));
}

}  // namespace loco::elastic
