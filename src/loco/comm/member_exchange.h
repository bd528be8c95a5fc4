// Every member's copy of a tensor, point to point: NoLoCo's exchange within its pair (or three).
//
// Note "paced-exchange" (piecewise_reduce.h): the values go in rounds of at most R bytes to each other
// member (R = Group::round_bytes_per_peer for the members), up to Group::rounds_in_flight rounds started
// before the first is waited for (round_window.h); every member derives the same rounds from the same
// size, and the values are the same whatever the rounds.
//
// Note "measured-link" (link/link_fit.h): where every rank of the group makes the same call at once, in
// groups of one size (NoLoCo's pairs when the group's size is even), an exchange of at least
// LinkFit::kMinSampleBytes per member is a sample of the link: the bytes this rank sent, its rounds and the
// seconds they took, agreed among the ranks by Group::learn_link. Groups of two and three mixed would not
// be: a rank of a three sends twice the bytes of a rank of a pair in the same rounds.
#pragma once

#include <vector>

#include "loco/comm/group.h"

namespace loco::comm {

// Whether the whole group exchanges at once, in groups of one size (the condition above).
enum class GroupWide { no, yes };

// `theirs[k]` is member k's `mine` (flattened), undefined for this rank's own position. `members`: ranks of
// `group`, ascending, holding this rank, the same list on every member.
std::vector<torch::Tensor> exchange_among(Group& group, const torch::Tensor& mine, const std::vector<int>& members,
                                          GroupWide group_wide);

}  // namespace loco::comm
