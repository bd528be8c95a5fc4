// Note "sparse-topk": SparseLoCo's compression of one tensor's error-feedback accumulator, and the bytes a
// replica sends for it (docs/sparseloco-reference.md for what the reference code does; the rule written out
// in tests/reference/sparseloco_ref.py, which the fixture test compares against).
//
//   tiles    a 2-D tensor (R, C) in tiles of a x b, a the largest divisor of R that is <= 64 and b the same
//            for C; a 1-D tensor in pieces of the largest divisor of its length that is <= 64 (as the
//            reference: no partial tiles, a prime length is one piece);
//   TopK     per tile the k largest |e| (k = min(k, tile size), at least 2, rounded down to even), ties to
//            the lower index, kept in ascending index order so that every machine sends the same bytes;
//   Q        one set of statistics per tensor over its selected values, in double (loco's choice, for
//            identical codes everywhere): shift = mean, sigma = unbiased std, scale = 6 sigma / 2^bits (1 when
//            0 or not finite), code = clamp(round-half-even(c / scale + 2^bits / 2), 0, 2^bits - 1) with
//            c = v - shift; a lookup table of each bin's mean c (0 when empty). Decoded value =
//            float(lookup[code]) + float(shift), added in float32.
//
// Wire layout of one tensor (little-endian): shift (f32), lookup (2^bits f32), then per tile its k indices
// within the tile at ceil(log2(tile size)) bits each, then the k codes at `bits` bits each, bit-packed from
// the lowest bit; a tile's bits start on a byte. The size depends only on the shape, k and bits. A receiver
// refuses indices out of the tile, not strictly ascending (duplicates), a non-finite shift or lookup, or a
// wrong size: a contribution from a bad peer is refused whole.
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
void sparse_encode(const SparseContribution& contribution, const SparseTiling& tiling, int bits, std::uint8_t* out);
// Throws CommError naming what is wrong for bytes no honest replica sends (see above).
SparseContribution sparse_decode(const std::uint8_t* in, std::size_t size, const SparseTiling& tiling, int bits);

// One replica's error-feedback round on its accumulator e (numel() values), the update of the algorithm
// reference's SparseLoCo: e <- beta e + delta (a float32 multiply, then an add); s = Q(TopK(e)); e <- e - s
// (so what the quantiser lost is carried forward too). Returns s.
SparseContribution sparse_error_feedback(float* accumulator, const float* delta, float beta, const SparseTiling& tiling,
                                         int bits);

// The aggregate of the replicas' contributions to one tensor: per coordinate, the mean over the replicas that
// sent it, summed in the order given, in float32; 0 where none did. Writes numel() values.
void sparse_mean(const std::vector<const SparseContribution*>& contributions, const SparseTiling& tiling, float* out);

}  // namespace loco::comm
