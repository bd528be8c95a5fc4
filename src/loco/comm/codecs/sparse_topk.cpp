#include "loco/comm/codecs/sparse_topk.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

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

std::size_t bits_for(std::size_t values) {  // bits that number `values` distinct indices
  std::size_t bits = 0;
  while ((std::size_t{1} << bits) < values) ++bits;
  return bits;
}

std::size_t tile_bytes(const SparseTiling& tiling, int bits) {
  const std::size_t tile_bits = tiling.k() * (bits_for(tiling.tile_size()) + static_cast<std::size_t>(bits));
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
  explicit BitReader(const std::uint8_t* in) : in_(in) {}
  std::uint32_t get(std::size_t bits) {
    std::uint32_t value = 0;
    for (std::size_t b = 0; b < bits; ++b, ++at_) value |= ((in_[at_ / 8] >> (at_ % 8)) & 1u) << b;
    return value;
  }

 private:
  const std::uint8_t* in_;
  std::size_t at_ = 0;
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
    const auto code = static_cast<std::size_t>(std::clamp(level, 0.0, static_cast<double>(n_bins - 1)));
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
  std::vector<std::uint16_t> order(tiling.tile_size());
  std::vector<float> magnitude(tiling.tile_size());
  for (std::size_t t = 0; t < tiling.tiles(); ++t) {
    for (std::size_t j = 0; j < tiling.tile_size(); ++j) magnitude[j] = std::fabs(values[tiling.flat_index(t, j)]);
    std::iota(order.begin(), order.end(), std::uint16_t{0});
    // The k largest |e|, ties to the lower index: the same choice on every machine.
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(tiling.k()), order.end(),
                      [&](std::uint16_t a, std::uint16_t b) {
                        return magnitude[a] > magnitude[b] || (magnitude[a] == magnitude[b] && a < b);
                      });
    std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(tiling.k()));
    for (std::size_t i = 0; i < tiling.k(); ++i) {
      out.tile_indices.push_back(order[i]);
      selected.push_back(values[tiling.flat_index(t, order[i])]);
    }
  }
  quantise(selected, bits, out);
  return out;
}

std::size_t sparse_encoded_bytes(const SparseTiling& tiling, int bits) {
  require_bits(bits);
  return header_bytes(bits) + tiling.tiles() * tile_bytes(tiling, bits);
}

void sparse_encode(const SparseContribution& contribution, const SparseTiling& tiling, int bits, std::uint8_t* out) {
  require_bits(bits);
  std::memcpy(out, &contribution.shift, sizeof(float));
  std::memcpy(out + sizeof(float), contribution.lookup.data(), sizeof(float) * contribution.lookup.size());
  std::uint8_t* tile_out = out + header_bytes(bits);
  const std::size_t index_bits = bits_for(tiling.tile_size());
  for (std::size_t t = 0; t < tiling.tiles(); ++t, tile_out += tile_bytes(tiling, bits)) {
    BitWriter writer(tile_out);
    for (std::size_t i = 0; i < tiling.k(); ++i) writer.put(contribution.tile_indices[t * tiling.k() + i], index_bits);
    for (std::size_t i = 0; i < tiling.k(); ++i) writer.put(contribution.codes[t * tiling.k() + i], bits);
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
  const std::uint8_t* tile_in = in + header_bytes(bits);
  const std::size_t index_bits = bits_for(tiling.tile_size());
  out.tile_indices.resize(tiling.selected());
  out.codes.resize(tiling.selected());
  for (std::size_t t = 0; t < tiling.tiles(); ++t, tile_in += tile_bytes(tiling, bits)) {
    BitReader reader(tile_in);
    for (std::size_t i = 0; i < tiling.k(); ++i) {
      const std::uint32_t index = reader.get(index_bits);
      if (index >= tiling.tile_size() || (i > 0 && index <= out.tile_indices[t * tiling.k() + i - 1])) {
        throw CommError(fmt::format("a sparse contribution whose tile {} holds index {} {}: refused", t, index,
                                    index >= tiling.tile_size() ? "outside the tile" : "out of ascending order"));
      }
      out.tile_indices[t * tiling.k() + i] = static_cast<std::uint16_t>(index);
    }
    for (std::size_t i = 0; i < tiling.k(); ++i)
      out.codes[t * tiling.k() + i] = static_cast<std::uint8_t>(reader.get(bits));
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

void sparse_mean(const std::vector<const SparseContribution*>& contributions, const SparseTiling& tiling, float* out) {
  std::fill(out, out + tiling.numel(), 0.0f);
  std::vector<std::uint32_t> count(tiling.numel(), 0);
  for (const SparseContribution* contribution : contributions) {
    for (std::size_t i = 0; i < contribution->tile_indices.size(); ++i) {
      const std::size_t flat = tiling.flat_index(i / tiling.k(), contribution->tile_indices[i]);
      out[flat] += contribution->decoded(i);
      ++count[flat];
    }
  }
  for (std::size_t i = 0; i < tiling.numel(); ++i) {
    if (count[i] > 0) out[i] /= static_cast<float>(count[i]);
  }
}

}  // namespace loco::comm
