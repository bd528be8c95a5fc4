// Parquet's two integer encodings under a string column's pages (parquet_text.h), decoded one value at a
// time so that a page's values are never all held: the RLE / bit-packing hybrid (definition levels,
// dictionary indices) and DELTA_BINARY_PACKED (the lengths of DELTA_LENGTH_BYTE_ARRAY, the prefix and suffix
// lengths of DELTA_BYTE_ARRAY). Neither throws: what does not add up ends the values (false, nullopt), and the
// reader says so naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace loco::data {

// Runs, each a varint header: its low bit 1, (header >> 1) groups of 8 values of `bit_width` bits,
// bit-packed; 0, (header >> 1) repeats of one value in whole bytes.
class HybridDecoder {
 public:
  HybridDecoder(std::string_view data, int bit_width) : data_(data), bit_width_(bit_width) {}

  // The next value; false where the data ends.
  bool next(std::uint32_t& value);

  // After next gave a value of a run of repeats: takes up to `limit` more of them at once (how many), so that
  // a run of a million null rows costs one step.
  std::uint64_t skip_repeats(std::uint64_t limit);

 private:
  // Reads the next run's header (and a repeat's value); false where the data ends or does not add up.
  bool start_run();

  std::string_view data_;
  int bit_width_;
  std::size_t position_ = 0;
  std::uint64_t repeats_left_ = 0;
  std::uint32_t repeat_value_ = 0;
  std::size_t packed_begin_ = 0;
  std::uint64_t packed_left_ = 0, packed_index_ = 0;
};

// A header (values per block, miniblocks per block, the count, the first value), then blocks of a minimum
// delta, one bit width per miniblock and the miniblocks' deltas above the minimum, bit-packed.
class DeltaDecoder {
 public:
  explicit DeltaDecoder(std::string_view data);

  // False when the header breaks the format's rules (a block a multiple of 128 values, a miniblock of 32)
  // or a bound against a stranger's header (writers use blocks of 128 or 256).
  bool valid() const { return valid_; }
  std::uint64_t count() const { return count_; }

  // The next value; nullopt past the count or where the data ends or does not add up.
  std::optional<std::int64_t> next();

  // Where the encoded integers end (the bytes after them hold what they describe): all of them are read on a
  // copy of this decoder, which keeps its place. nullopt where they do not add up.
  std::optional<std::size_t> end() const;

 private:
  // Starts the next miniblock (reading a block's header where one ends); false where the data does not add up.
  bool start_miniblock();
  std::uint64_t varint();

  std::string_view data_;
  std::size_t position_ = 0;
  bool valid_ = true;
  std::uint64_t miniblocks_ = 0, miniblock_values_ = 0, count_ = 0, produced_ = 0;
  std::int64_t value_ = 0, min_delta_ = 0;
  std::vector<std::uint8_t> widths_;  // of the block's miniblocks
  std::size_t miniblock_ = 0;         // the next of them
  std::size_t miniblock_begin_ = 0;
  int miniblock_width_ = 0;
  std::uint64_t miniblock_index_ = 0, left_in_miniblock_ = 0;
};

// The bits a value up to `max_value` takes (a definition level's width).
int bit_width_of(std::uint32_t max_value);

}  // namespace loco::data
