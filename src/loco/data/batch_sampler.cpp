#include "loco/data/batch_sampler.h"

#include <fmt/format.h>

#include <random>

#include "loco/data/shuffle.h"
#include "loco/util/error.h"

namespace loco::data {

namespace {

constexpr const char* kOrderNames[] = {"keyed", "stored"};

}  // namespace

nlohmann::json SamplerState::to_json() const {
  return {{"epoch", epoch}, {"cursor", cursor}, {"order", kOrderNames[static_cast<int>(order)]}};
}

SamplerState SamplerState::from_json(const nlohmann::json& j) {
  const auto malformed = [&] {
    return DataError(
        fmt::format("the data sampler state {} is malformed: it needs unsigned integers \"epoch\" and "
                    "\"cursor\", and \"order\" \"keyed\" or \"stored\" when present. The checkpoint is damaged; "
                    "resume from another one.",
                    j.dump()));
  };
  auto field = [&](const char* name) {
    auto it = j.is_object() ? j.find(name) : j.end();
    if (it == j.end() || !it->is_number_unsigned()) throw malformed();
    return it->get<std::uint64_t>();
  };
  SamplerState state{field("epoch"), field("cursor"), Order::stored};  // no "order": note "keyed-order"
  if (const auto it = j.find("order"); it != j.end()) {
    if (*it == kOrderNames[0]) {
      state.order = Order::keyed;
    } else if (*it != kOrderNames[1]) {
      throw malformed();
    }
  }
  return state;
}

BatchSampler::BatchSampler(const TokenDataset& data, std::int64_t seq_len, std::uint64_t seed, std::int64_t replica,
                           std::int64_t num_replicas, bool shuffle)
    : data_(data),
      seq_len_(static_cast<std::uint64_t>(seq_len)),
      seed_(seed),
      replica_(static_cast<std::uint64_t>(replica)),
      num_replicas_(static_cast<std::uint64_t>(num_replicas)),
      shuffle_(shuffle) {
  LOCO_CHECK(seq_len > 0, "seq_len must be positive, got {}", seq_len);
  LOCO_CHECK(num_replicas > 0 && replica >= 0 && replica < num_replicas, "replica {} of {}", replica, num_replicas);
  windows_ = data.size() > 0 ? (data.size() - 1) / seq_len_ : 0;
  windows_per_epoch_ = windows_ / num_replicas_;
  if (windows_per_epoch_ == 0) {
    throw DataError(
        fmt::format("{} has {} tokens: too few for one window of data.seq_len + 1 = {} tokens for each of {} "
                    "replica(s). Use a shorter data.seq_len, fewer replicas, or more data (for the val split, "
                    "a larger --val-fraction in `loco prepare`).",
                    data.name(), data.size(), seq_len_ + 1, num_replicas_));
  }
  start_epoch(0);
}

void BatchSampler::start_epoch(std::uint64_t epoch) {
  state_ = SamplerState{epoch, 0, state_.order};
  keyed_.reset();  // exactly one of the two holds the epoch's order, the one state_.order names
  stored_ = {};
  if (!shuffle_) return;
  // All W windows take part, so the W mod R left over differ from epoch to epoch.
  if (state_.order == SamplerState::Order::keyed) {
    keyed_.emplace(windows_, mix_seed(seed_, epoch));
  } else {
    std::mt19937_64 rng(mix_seed(seed_, epoch));
    stored_ = random_permutation(windows_, rng);
  }
}

void BatchSampler::next_batch(std::int64_t batch_size, std::int64_t* inputs, std::int64_t* targets) {
  LOCO_CHECK(batch_size >= 0, "batch_size {}", batch_size);
  for (std::int64_t row = 0; row < batch_size; ++row) {
    std::uint64_t position = replica_ + state_.cursor * num_replicas_;
    std::uint64_t window = !shuffle_ ? position : keyed_ ? (*keyed_)(position) : stored_[position];
    std::uint64_t first = window * seq_len_;
    data_.copy_tokens(first, seq_len_, inputs + row * seq_len_);
    data_.copy_tokens(first + 1, seq_len_, targets + row * seq_len_);
    if (++state_.cursor == windows_per_epoch_) start_epoch(state_.epoch + 1);
  }
}

void BatchSampler::restore(const SamplerState& state) {
  if (state.cursor >= windows_per_epoch_) {
    throw DataError(
        fmt::format("the checkpoint's data position (epoch {}, window {}) is beyond the {} windows per epoch of "
                    "this replica on {}: data, data.seq_len or the number of replicas changed since it was "
                    "written. Resume with the same data and settings, or start a new run.",
                    state.epoch, state.cursor, windows_per_epoch_, data_.name()));
  }
  state_.order = state.order;
  start_epoch(state.epoch);
  state_.cursor = state.cursor;
}

}  // namespace loco::data
