// Note "elastic-data" (docs/fault-tolerance.md "Data"): every member of an elastic run reads one global,
// epoch-shuffled order of windows. A round (the inner steps between two synchronisations; one step for
// data parallel) is laid out by the quorum that starts it: member r of n reads windows [C + r·w, C + (r+1)·w),
// w = the round's windows per member; the next round starts at C + n·w. The layout travels with the
// replica state, so a member that heals continues it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "loco/io/safetensors.h"

namespace loco::elastic {

class RoundLayout {
 public:
  // A round of `windows` windows per member begins for `members` members: the first window of member `rank`.
  std::uint64_t start(std::size_t members, int rank, std::uint64_t windows);
  // The round laid out last, of `windows` windows per member, laid out again for `members` members, as nothing
  // of it was read (members resumed from checkpoints taken as it began: note "elastic-resume").
  std::uint64_t restart(std::size_t members, int rank, std::uint64_t windows);
  // Whether the round laid out last, laid out for as many `members`, has `window` strictly inside the part of
  // member `rank`: some of it read, not all (note "resume-inside-round").
  bool holds_inside(std::size_t members, int rank, std::uint64_t window) const;
  // The layout in words, for members to compare.
  std::string describe() const;

  // For checkpoints and heals: added to (read from) a strategy's state.json entry.
  void save_to(nlohmann::json& json) const;
  void load_from(const nlohmann::json& json, const SafetensorsContent& tensors);

 private:
  std::uint64_t start_ = 0;    // C: the first window of the round
  std::uint64_t members_ = 0;  // n
  std::uint64_t windows_ = 0;  // w: windows per member
};

}  // namespace loco::elastic
