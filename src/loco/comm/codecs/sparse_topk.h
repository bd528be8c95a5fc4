// Note "sparse-topk": SparseLoCo's compression of one tensor's error-feedback accumulator, and the bytes a
// replica sends for it (docs/sparseloco-reference.md for what the reference code does; the rule written out
// in tests/reference/sparseloco_ref.py, which the fixture test compares against).
//
//   tiles    a 2-D tensor (R, C) in tiles of a x b, a the largest divisor of R that is <= 64 and b the same
//            for C; a 1-D tensor in pieces of the largest divisor of its length that is <= 64 (as the
//            reference: no partial tiles, a prime length is one piece);
//   TopK     per tile the k largest |e| (k = min(k, tile size), at least 2, rounded down to even), ties to
//            the lower index, a NaN |e| larger than any number (a replica that diverged sends its NaN, and
//            its shift and lookup become NaN, which receivers refuse), kept in ascending index order so
//            that every machine sends the same bytes;
//   Q        one set of statistics per tensor over its selected values, in double (loco's choice, for
//            identical codes everywhere): shift = mean, sigma = unbiased std, scale = 6 sigma / 2^bits (1 when
//            0 or not finite), code = clamp(round-half-even(c / scale + 2^bits / 2), 0, 2^bits - 1) with
//            c = v - shift; a lookup table of each bin's mean c (0 when empty). Decoded value =
//            float(lookup[code]) + float(shift), added in float32.
//
// Wire layout of one tensor (little-endian): shift (f32), lookup (2^bits f32), then per tile, bit-packed from
// the lowest bit of each byte and starting on a byte:
//   upper    the k ascending tile-local indices in Elias-Fano code: with n the tile size and
//            L = floor(log2(n / k)) (0 when n / k < 2), index i's high part h_i = index_i >> L in unary, a
//            string of k + ceil(n / 2^L) bits in which bit h_i + i is set for each i and all others are 0;
//   low      the low L bits of each index, in order, L bits each;
//   codes    the k codes, `bits` bits each.
// So a tile takes k + ceil(n / 2^L) + k (L + bits) bits, (k + ceil(n / 2^L) + k L) / k bits per index
// (sparse_bits_per_index): 8 for 64 x 64 tiles at k = 64 (L = 6, 128 upper bits), against the 12 of the
// reference's fixed-width packing. The size depends only on the shape, k and bits, never on which indices
// were chosen, so every replica's buffer has the same size (they are all-gathered as equal buffers). A
// receiver refuses an upper string without exactly k set bits, an index outside the tile, indices not
// strictly ascending (duplicates: two equal high parts whose low parts do not increase), a non-finite shift
// or lookup, or a wrong size: a contribution from a bad peer is refused whole. Bits after a tile's last code
// (up to its next byte) are ignored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace loco::comm {

// How a tensor of `shape` (1-D or 2-D) is cut into tiles, and how many values each tile sends.
class SparseTiling {
 public:
  SparseTiling(const std::vector<std::int64_t>& shape, std::size_t k);

  std::size_t numel() const { return rows_ * cols_; }
  std::size_t tiles() const { return tile_rows_count_ * tile_cols_count_; }
  std::size_t tile_size() const { return tile_rows_ * tile_cols_; }
  std::size_t k() const { return k_; }  // per tile
  std::size_t selected() const { return tiles() * k_; }
  // The flat index in the tensor of element j (row-major within the tile) of tile t (row-major tiles).
  std::size_t flat_index(std::size_t tile, std::size_t j) const;

 private:
  std::size_t rows_, cols_, tile_rows_, tile_cols_, tile_rows_count_, tile_cols_count_, k_;
};

// What one replica sends for one tensor: for each tile its k indices within the tile (ascending), their
// codes, and the tensor's lookup table and shift.
struct SparseContribution {
  std::vector<std::uint16_t> tile_indices;  // tiles() * k, tile after tile
  std::vector<std::uint8_t> codes;          // same order
  std::vector<float> lookup;                // 2^bits
  float shift = 0;

  float decoded(std::size_t i) const { return lookup[codes[i]] + shift; }
};

// TopK then Q of `values` (the tensor's numel() values). bits: 2 or 4.
SparseContribution sparse_compress(const float* values, const SparseTiling& tiling, int bits);

// Bytes of one tensor's contribution on the wire.
std::size_t sparse_encoded_bytes(const SparseTiling& tiling, int bits);
// Bits a tile spends per selected value on its indices (upper string and low parts; the module comment).
double sparse_bits_per_index(const SparseTiling& tiling);
// `contribution` must be what sparse_compress returns for `tiling` and `bits` (in particular each tile's
// indices strictly ascending and inside the tile): a check fails otherwise.
void sparse_encode(const SparseContribution& contribution, const SparseTiling& tiling, int bits, std::uint8_t* out);
// Throws CommError naming what is wrong for bytes no honest replica sends (see above).
SparseContribution sparse_decode(const std::uint8_t* in, std::size_t size, const SparseTiling& tiling, int bits);

// One replica's error-feedback round on its accumulator e (numel() values), the update of the algorithm
// reference's SparseLoCo: e <- beta e + delta (a float32 multiply, then an add); s = Q(TopK(e)); e <- e - s
// (so what the quantiser lost is carried forward too). Returns s.
SparseContribution sparse_error_feedback(float* accumulator, const float* delta, float beta, const SparseTiling& tiling,
                                         int bits);

}  // namespace loco::comm
