#include "loco/data/parquet_encodings.h"

#include <algorithm>

#include "loco/data/packed_integers.h"

namespace loco::data {

bool HybridDecoder::start_run() {
  const std::optional<std::uint64_t> header = read_varint(data_, position_);
  if (!header) return false;
  if (*header & 1) {
    const std::uint64_t groups = *header >> 1;
    const std::uint64_t bytes = groups * static_cast<std::uint64_t>(bit_width_);
    if (groups > data_.size() || bytes > data_.size() - position_) return false;
    packed_begin_ = position_;
    packed_left_ = groups * 8;
    packed_index_ = 0;
    position_ += static_cast<std::size_t>(bytes);
    return true;
  }
  const auto width = static_cast<std::size_t>((bit_width_ + 7) / 8);
  if (width > data_.size() - position_) return false;
  repeat_value_ = 0;
  for (std::size_t i = 0; i < width; ++i) {
    repeat_value_ |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(data_[position_ + i])) << (8 * i);
  }
  position_ += width;
  repeats_left_ = *header >> 1;
  return true;
}

bool HybridDecoder::next(std::uint32_t& value) {
  while (repeats_left_ == 0 && packed_left_ == 0) {
    if (!start_run()) return false;
  }
  if (repeats_left_ > 0) {
    --repeats_left_;
    value = repeat_value_;
    return true;
  }
  value = static_cast<std::uint32_t>(
      unpack_bits(data_.substr(packed_begin_), packed_index_ * static_cast<std::uint64_t>(bit_width_), bit_width_));
  ++packed_index_;
  --packed_left_;
  return true;
}

std::uint64_t HybridDecoder::skip_repeats(std::uint64_t limit) {
  const std::uint64_t taken = std::min(repeats_left_, limit);
  repeats_left_ -= taken;
  return taken;
}

DeltaDecoder::DeltaDecoder(std::string_view data) : data_(data) {
  const std::uint64_t block_values = varint();
  miniblocks_ = varint();
  count_ = varint();
  value_ = zigzag_decode(varint());
  if (!valid_ || block_values == 0 || block_values % 128 != 0 || block_values > (1u << 16) || miniblocks_ == 0 ||
      block_values % miniblocks_ != 0 || (block_values / miniblocks_) % 32 != 0) {
    valid_ = false;
  }
  miniblock_values_ = valid_ ? block_values / miniblocks_ : 0;
}

std::uint64_t DeltaDecoder::varint() {
  const std::optional<std::uint64_t> value = read_varint(data_, position_);
  if (!value) valid_ = false;
  return value.value_or(0);
}

bool DeltaDecoder::start_miniblock() {
  if (miniblock_ == widths_.size()) {  // a new block
    min_delta_ = zigzag_decode(varint());
    if (!valid_ || miniblocks_ > data_.size() - position_) return false;
    widths_.assign(data_.begin() + static_cast<std::ptrdiff_t>(position_),
                   data_.begin() + static_cast<std::ptrdiff_t>(position_ + miniblocks_));
    position_ += static_cast<std::size_t>(miniblocks_);
    miniblock_ = 0;
  }
  const int width = widths_[miniblock_++];
  if (width > 64) return false;
  const std::uint64_t bytes = miniblock_values_ * static_cast<std::uint64_t>(width) / 8;
  if (bytes > data_.size() - position_) return false;
  miniblock_begin_ = position_;
  miniblock_width_ = width;
  miniblock_index_ = 0;
  left_in_miniblock_ = miniblock_values_;
  position_ += static_cast<std::size_t>(bytes);
  return true;
}

std::optional<std::int64_t> DeltaDecoder::next() {
  if (!valid_ || produced_ >= count_) return std::nullopt;
  if (produced_++ == 0) return value_;
  if (left_in_miniblock_ == 0 && !start_miniblock()) {
    valid_ = false;
    return std::nullopt;
  }
  const std::uint64_t delta =
      unpack_bits(data_.substr(miniblock_begin_), miniblock_index_ * static_cast<std::uint64_t>(miniblock_width_),
                  miniblock_width_);
  ++miniblock_index_;
  --left_in_miniblock_;
  // Wrapping as the format's writers do: the deltas of 64-bit values may overflow a signed 64-bit difference.
  value_ =
      static_cast<std::int64_t>(static_cast<std::uint64_t>(value_) + static_cast<std::uint64_t>(min_delta_) + delta);
  return value_;
}

std::optional<std::size_t> DeltaDecoder::end() const {
  DeltaDecoder rest = *this;
  while (rest.produced_ < rest.count_) {
    if (!rest.next()) return std::nullopt;
  }
  return rest.position_;
}

int bit_width_of(std::uint32_t max_value) {
  int width = 0;
  while (width < 32 && (max_value >> width) != 0) ++width;
  return width;
}

}  // namespace loco::data
