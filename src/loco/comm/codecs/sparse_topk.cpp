#include "loco/comm/codecs/sparse_topk.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "loco/comm/comm_error.h"
#include "loco/util/error.h"

namespace loco::comm {

namespace {

constexpr std::size_t kTileSide = 64;

std::size_t largest_divisor_at_most(std::size_t n, std::size_t limit) {
  for (std::size_t d = std::min(n, limit); d > 1; --d) {
    if (n % d == 0) return d;
  }
  return 1;
}

// Elias-Fano parameters of a tile of n values sending k of them (module comment).
std::size_t low_bits(const SparseTiling& tiling) {  // L = floor(log2(n / k)): the largest L with k 2^L <= n
  std::size_t low = 0;
  while ((tiling.k() << (low + 1)) <= tiling.tile_size()) ++low;
  return low;
}

std::size_t upper_bits(const SparseTiling& tiling) {  // k + ceil(n / 2^L)
  const std::size_t bucket = std::size_t{1} << low_bits(tiling);
  return tiling.k() + (tiling.tile_size() + bucket - 1) / bucket;
}

std::size_t tile_bytes(const SparseTiling& tiling, int bits) {
  const std::size_t tile_bits =
      upper_bits(tiling) + tiling.k() * (low_bits(tiling) + static_cast<std::size_t>(bits));
  return (tile_bits + 7) / 8;
}

std::size_t header_bytes(int bits) { return sizeof(float) * (1 + (std::size_t{1} << bits)); }

void require_bits(int bits) { LOCO_CHECK(bits == 2 || bits == 4, "sparse codes of {} bits (2 or 4)", bits); }

// Bits written from the lowest bit of each byte up.
class BitWriter {
 public:
  explicit BitWriter(std::uint8_t* out) : out_(out) {}
  void put(std::uint32_t value, std::size_t bits) {
    for (std::size_t b = 0; b < bits; ++b, ++at_) {
      if (at_ % 8 == 0) out_[at_ / 8] = 0;
      out_[at_ / 8] |= static_cast<std::uint8_t>(((value >> b) & 1u) << (at_ % 8));
    }
  }

 private:
  std::uint8_t* out_;
  std::size_t at_ = 0;
};

class BitReader {
 public:
  BitReader(const std::uint8_t* in, std::size_t at_bit) : in_(in), at_(at_bit) {}
  std::uint32_t get(std::size_t bits) {
    std::uint32_t value = 0;
    for (std::size_t b = 0; b < bits; ++b, ++at_) value |= ((in_[at_ / 8] >> (at_ % 8)) & 1u) << b;
    return value;
  }

 private:
  const std::uint8_t* in_;
  std::size_t at_;
};

// Q of the selected values (module comment): codes, lookup and shift into `out`.
void quantise(const std::vector<float>& values, int bits, SparseContribution& out) {
  const std::size_t n_bins = std::size_t{1} << bits;
  const std::size_t n = values.size();
  double sum = 0;
  for (float v : values) sum += v;
  const double shift = n > 0 ? sum / static_cast<double>(n) : 0.0;
  double squares = 0;
  for (float v : values) squares += (v - shift) * (v - shift);
  const double sigma = n > 1 ? std::sqrt(squares / static_cast<double>(n - 1)) : 0.0;
  double scale = 6.0 * sigma / static_cast<double>(n_bins);
  if (!(scale > 0) || !std::isfinite(scale)) scale = 1.0;

  out.codes.resize(n);
  std::vector<double> bin_sum(n_bins, 0.0);
  std::vector<std::size_t> bin_count(n_bins, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const double c = static_cast<double>(values[i]) - shift;
    const double level = std::nearbyint(c / scale + static_cast<double>(n_bins) / 2);  // half to even
    // A NaN level (a NaN or infinite value selected) takes code 0: its NaN reaches the lookup and the shift.
    const auto code = std::isnan(level)
                          ? std::size_t{0}
                          : static_cast<std::size_t>(std::clamp(level, 0.0, static_cast<double>(n_bins - 1)));
    out.codes[i] = static_cast<std::uint8_t>(code);
    bin_sum[code] += c;
    ++bin_count[code];
  }
  out.lookup.assign(n_bins, 0.0f);
  for (std::size_t b = 0; b < n_bins; ++b) {
    if (bin_count[b] > 0) out.lookup[b] = static_cast<float>(bin_sum[b] / static_cast<double>(bin_count[b]));
  }
  out.shift = static_cast<float>(shift);
}

}  // namespace

SparseTiling::SparseTiling(const std::vector<std::int64_t>& shape, std::size_t k) {
  LOCO_CHECK((shape.size() == 1 || shape.size() == 2) && shape[0] > 0 && shape.back() > 0,
             "sparse tiles of a tensor of {} dimensions", shape.size());
  rows_ = shape.size() == 2 ? static_cast<std::size_t>(shape[0]) : 1;
  cols_ = static_cast<std::size_t>(shape.back());
  tile_rows_ = largest_divisor_at_most(rows_, kTileSide);
  tile_cols_ = largest_divisor_at_most(cols_, kTileSide);
  tile_rows_count_ = rows_ / tile_rows_;
  tile_cols_count_ = cols_ / tile_cols_;
  const std::size_t clamped = std::max<std::size_t>(std::min(k, tile_size()), 2);
  k_ = std::min(clamped - clamped % 2, tile_size());
}

std::size_t SparseTiling::flat_index(std::size_t tile, std::size_t j) const {
  const std::size_t tile_row = tile / tile_cols_count_;
  const std::size_t tile_col = tile % tile_cols_count_;
  const std::size_t row = tile_row * tile_rows_ + j / tile_cols_;
  const std::size_t col = tile_col * tile_cols_ + j % tile_cols_;
  return row * cols_ + col;
}

SparseContribution sparse_compress(const float* values, const SparseTiling& tiling, int bits) {
  require_bits(bits);
  SparseContribution out;
  out.tile_indices.reserve(tiling.selected());
  std::vector<float> selected;
  selected.reserve(tiling.selected());
  // The order of choice is a total order: larger |e| first, a NaN before any number, then the lower index.
  // Here as one integer per value, compared as integers: the bits of |e| (which order non-negative floats as
  // their values; every NaN above infinity) above the complement of the index. So the k largest keys are the
  // same set on every machine, whichever way they are found (nth_element: linear in the tile).
  const auto rank_key = [](float value, std::size_t j) {
    const float magnitude = std::fabs(value);
    std::uint32_t magnitude_bits = 0xffffffffu;
    if (!std::isnan(magnitude)) std::memcpy(&magnitude_bits, &magnitude, sizeof(magnitude_bits));
    return (std::uint64_t{magnitude_bits} << 32) | (0xffffffffu - static_cast<std::uint32_t>(j));
  };
  std::vector<std::uint64_t> keys(tiling.tile_size());
  std::vector<std::uint16_t> chosen(tiling.k());
  const auto k = static_cast<std::ptrdiff_t>(tiling.k());
  for (std::size_t t = 0; t < tiling.tiles(); ++t) {
    for (std::size_t j = 0; j < tiling.tile_size(); ++j) keys[j] = rank_key(values[tiling.flat_index(t, j)], j);
    std::nth_element(keys.begin(), keys.begin() + k, keys.end(), std::greater<>());  // the k largest first
    for (std::size_t i = 0; i < tiling.k(); ++i) {
      chosen[i] = static_cast<std::uint16_t>(0xffffffffu - static_cast<std::uint32_t>(keys[i]));
    }
    std::sort(chosen.begin(), chosen.end());
    for (std::uint16_t j : chosen) {
      out.tile_indices.push_back(j);
      selected.push_back(values[tiling.flat_index(t, j)]);
    }
  }
  quantise(selected, bits, out);
  return out;
}

std::size_t sparse_encoded_bytes(const SparseTiling& tiling, int bits) {
  require_bits(bits);
  return header_bytes(bits) + tiling.tiles() * tile_bytes(tiling, bits);
}

double sparse_bits_per_index(const SparseTiling& tiling) {
  return static_cast<double>(upper_bits(tiling) + tiling.k() * low_bits(tiling)) / static_cast<double>(tiling.k());
}

void sparse_encode(const SparseContribution& contribution, const SparseTiling& tiling, int bits, std::uint8_t* out) {
  require_bits(bits);
  const std::size_t k = tiling.k();
  LOCO_CHECK(contribution.tile_indices.size() == tiling.selected() && contribution.codes.size() == tiling.selected() &&
                 contribution.lookup.size() == (std::size_t{1} << bits),
             "a sparse contribution of {} indices, {} codes and {} lookup values for {} tiles of k = {} at {} bits",
             contribution.tile_indices.size(), contribution.codes.size(), contribution.lookup.size(), tiling.tiles(),
             k, bits);
  for (std::size_t i = 0; i < tiling.selected(); ++i) {
    const std::uint16_t index = contribution.tile_indices[i];
    LOCO_CHECK(index < tiling.tile_size() && (i % k == 0 || index > contribution.tile_indices[i - 1]) &&
                   contribution.codes[i] < (1u << bits),
               "sparse index {} (code {}) at {} of tile {}: indices strictly ascending within a tile of {} values",
               index, contribution.codes[i], i % k, i / k, tiling.tile_size());
  }
  std::memcpy(out, &contribution.shift, sizeof(float));
  std::memcpy(out + sizeof(float), contribution.lookup.data(), sizeof(float) * contribution.lookup.size());
  std::uint8_t* tile_out = out + header_bytes(bits);
  const std::size_t low = low_bits(tiling);
  const std::size_t upper = upper_bits(tiling);
  const std::uint32_t low_mask = (std::uint32_t{1} << low) - 1;
  for (std::size_t t = 0; t < tiling.tiles(); ++t, tile_out += tile_bytes(tiling, bits)) {
    const std::uint16_t* indices = contribution.tile_indices.data() + t * k;
    BitWriter writer(tile_out);
    for (std::size_t at = 0, i = 0; at < upper; ++at) {  // bit h_i + i for each i
      const bool set = i < k && (static_cast<std::size_t>(indices[i]) >> low) + i == at;
      writer.put(set ? 1 : 0, 1);
      if (set) ++i;
    }
    for (std::size_t i = 0; i < k; ++i) writer.put(indices[i] & low_mask, low);
    for (std::size_t i = 0; i < k; ++i) writer.put(contribution.codes[t * k + i], bits);
  }
}

SparseContribution sparse_decode(const std::uint8_t* in, std::size_t size, const SparseTiling& tiling, int bits) {
  require_bits(bits);
  if (size != sparse_encoded_bytes(tiling, bits)) {
    throw CommError(fmt::format("a sparse contribution of {} bytes where its tensor's takes {}: refused", size,
                                sparse_encoded_bytes(tiling, bits)));
  }
  SparseContribution out;
  out.lookup.resize(std::size_t{1} << bits);
  std::memcpy(&out.shift, in, sizeof(float));
  std::memcpy(out.lookup.data(), in + sizeof(float), sizeof(float) * out.lookup.size());
  if (!std::isfinite(out.shift) ||
      !std::all_of(out.lookup.begin(), out.lookup.end(), [](float v) { return std::isfinite(v); })) {
    throw CommError("a sparse contribution whose values decode to NaN or infinity: refused");
  }
  // Every bit read below lies in the tile's bytes: the upper string, k low parts and k codes are read at
  // their fixed offsets and lengths, which sum to at most tile_bytes * 8 whatever the bytes say.
  const std::size_t k = tiling.k();
  const std::size_t low = low_bits(tiling);
  const std::size_t upper = upper_bits(tiling);
  const std::uint8_t* tile_in = in + header_bytes(bits);
  out.tile_indices.resize(tiling.selected());
  out.codes.resize(tiling.selected());
  for (std::size_t t = 0; t < tiling.tiles(); ++t, tile_in += tile_bytes(tiling, bits)) {
    BitReader counter(tile_in, 0);
    std::size_t set = 0;
    for (std::size_t at = 0; at < upper; ++at) set += counter.get(1);
    if (set != k) {
      throw CommError(fmt::format(
          "a sparse contribution whose tile {} sets {} of its {} upper index bits where it sends {} indices: refused",
          t, set, upper, k));
    }
    BitReader high(tile_in, 0);
    BitReader lows(tile_in, upper);
    std::uint16_t* indices = out.tile_indices.data() + t * k;
    for (std::size_t at = 0, i = 0; i < k; ++at) {  // ends within the string: it holds k set bits
      if (high.get(1) == 0) continue;
      const std::size_t index = ((at - i) << low) | lows.get(low);
      if (index >= tiling.tile_size() || (i > 0 && index <= indices[i - 1])) {
        throw CommError(fmt::format("a sparse contribution whose tile {} holds index {} {}: refused", t, index,
                                    index >= tiling.tile_size() ? "outside the tile" : "out of ascending order"));
      }
      indices[i++] = static_cast<std::uint16_t>(index);
    }
    BitReader codes(tile_in, upper + k * low);
    for (std::size_t i = 0; i < k; ++i) out.codes[t * k + i] = static_cast<std::uint8_t>(codes.get(bits));
  }
  return out;
}

SparseContribution sparse_error_feedback(float* accumulator, const float* delta, float beta, const SparseTiling& tiling,
                                         int bits) {
  for (std::size_t i = 0; i < tiling.numel(); ++i) {
    const float decayed = accumulator[i] * beta;  // rounded before the add, as the reference's mul_ then add_
    accumulator[i] = decayed + delta[i];
  }
  SparseContribution sent = sparse_compress(accumulator, tiling, bits);
  for (std::size_t i = 0; i < sent.tile_indices.size(); ++i) {
    const std::size_t flat = tiling.flat_index(i / tiling.k(), sent.tile_indices[i]);
    accumulator[flat] -= sent.decoded(i);
  }
  return sent;
}

}  // namespace loco::comm
