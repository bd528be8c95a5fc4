#include "loco/train/fixed_membership.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "loco/comm/group.h"
#include "loco/data/dataset_meta.h"
#include "loco/train/run_directory.h"
#include "loco/util/error.h"

namespace loco {

FixedMembership::FixedMembership(comm::Group* group, std::int64_t replicas, bool shared_data)
    : group_(group), rank_(group ? group->rank() : 0), size_(group ? group->size() : 1), shared_data_(shared_data) {
  if (size_ != std::max<std::int64_t>(replicas, 1)) {
    throw InternalError(fmt::format("dist.replicas is {} but the group has {} ranks", replicas, size_));
  }
}

std::filesystem::path FixedMembership::directory(const std::filesystem::path& out_dir) const {
  return replica_directory(out_dir, rank_);
}

DataSlice FixedMembership::data_slice() const { return {rank_, size_}; }

// Ranks on several hosts each read their own data directory, prepared there: all must hold ids of one
// tokenizer, or the replicas would learn different meanings for the same ids and average them.
void FixedMembership::check_same_data(const std::filesystem::path& data_dir) {
  if (group_ == nullptr || size_ < 2 || shared_data_) return;
  const std::string hash = data::prepared_tokenizer_hash(data_dir.string());
  const std::vector<int> differing = group_->ranks_differing_from_rank_0(std::string_view(hash));
  if (!differing.empty()) {
    throw DataError(fmt::format(
        "the ranks' data were prepared with different tokenizers: rank(s) {} differ from rank 0 (this rank, {}, "
        "reads {}, prepared with {}). Prepare every rank's data with one tokenizer: loco prepare --tokenizer-from "
        "RANK_0_DATA_DIR --input CORPUS --out NEW_DIR, or copy rank 0's data directory",
        fmt::join(differing, ", "), rank_, data_dir.string(), hash));
  }
}

std::string FixedMembership::describe() const { return fmt::format("M={}", size_); }

void FixedMembership::synchronise(std::int64_t step, const Synchronisation& sync) {
  LOCO_CHECK(group_ != nullptr, "a synchronisation of a single replica");
  const Participants everyone{group_, step, {}, false};
  LOCO_CHECK(sync.attempt(everyone), "an attempt with a fixed membership asked to be tried again");
}

}  // namespace loco
