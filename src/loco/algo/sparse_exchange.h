// SparseLoCo's exchange (docs/algorithm-reference.md §12; the outer step around it: algo/diloco.h). Each
// replica keeps an error-feedback accumulator e per fragment and, at a synchronisation, sends a sparse,
// quantised part of it instead of its pseudo-gradient Δ:
//
//     e ← β·e + Δ                       (float32, decay first as the reference code)
//     s = Q(TopK_tile(e))               per tensor: the k largest |e| of each tile, 2- or 4-bit values
//                                       (comm/codecs/sparse_topk.h)
//     e ← e − s                         what was not sent, and what the quantiser lost, is carried forward
//     Δ̄ = aggregate_r(s_r)              sparse_aggregation.h: the mean over the replicas that sent each
//                                       coordinate (or over all), or a robust rule
//
// Sparse sets do not add up on the way, so every replica's bytes go to every replica (a paced ring
// all-gather of equal-size buffers: comm/paced_all_gather.h) and each decodes and aggregates them all,
// in rank order, so that all end with the same Δ̄. One replica's bytes: an f64 weight, then per tensor
// its encoding (size fixed by the shapes, k and bits). A contribution that does not decode (indices
// outside a tile, duplicated or unsorted, a wrong count, values that decode to NaN, a weight other than 0
// or 1) is refused whole: left out by every replica and reported as rejected, as the dense rules do with
// a NaN.
//
// Weights: 1, or 0 to leave a replica out of Δ̄ (one that just healed, or left out by its membership). A replica that
// takes part with weight 0 subtracts nothing from e: its work is carried to the next round. One whose
// state was just replaced by a heal (`own_work` false) restarts e at 0: the accumulator it adopted is
// its donor's, which the donor sends itself. One whose e holds a NaN or an infinity sends it (and is
// refused by everyone) and restarts e at 0.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "loco/algo/pseudo_gradient_average.h"
#include "loco/comm/codecs/sparse_topk.h"
#include "loco/comm/group.h"

namespace loco {

struct SparseSettings {
  double beta = 0.95;             // decay of the accumulator
  std::size_t topk = 64;          // k per tile (tiles of up to 64 x 64 values)
  int bits = 2;                   // bits per sent value: 2 or 4
  bool over_contributors = true;  // average a coordinate over the replicas that sent it, not over all
};

// A fragment's tensors as SparseLoCo tiles them, and what one replica sends for them.
class SparseLayout {
 public:
  SparseLayout(const std::vector<std::vector<std::int64_t>>& shapes, const SparseSettings& settings);

  const std::vector<comm::SparseTiling>& tilings() const { return tilings_; }
  // Where tensor t's values start in the fragment.
  std::size_t offset(std::size_t t) const { return offsets_[t]; }
  std::size_t encoded_bytes(std::size_t t) const { return encoded_[t]; }
  std::int64_t numel() const { return numel_; }
  // Values sent per synchronisation, and the bytes one replica sends (weight and every tensor).
  std::size_t selected() const { return selected_; }
  std::size_t payload_bytes() const { return payload_bytes_; }
  // The bits per sent index on the wire (Elias–Fano, comm::sparse_bits_per_index), over every tensor.
  double bits_per_index() const;
  // "top-64 per tile of up to 64x64 (1.56% of the values), 2-bit values, 8.0 bits per index, 16808 bytes per
  // replica and sync (204x fewer than fp32)".
  std::string describe() const;

 private:
  SparseSettings settings_;
  std::vector<comm::SparseTiling> tilings_;
  std::vector<std::size_t> offsets_, encoded_;
  std::int64_t numel_ = 0;
  std::size_t selected_ = 0, payload_bytes_ = 0;
};

struct SparseRound {
  PseudoGradientAverage averaged;  // Σ weight in Δ̄ (0: apply nothing) and the refused replicas
  torch::Tensor accumulator;       // this replica's e after the round: becomes its e when the outer step commits
  // Where its time went (loco_outer_step_bench reports it): the error feedback, selection and encoding;
  // waiting for the all-gather; decoding and aggregating every replica's.
  double encode_s = 0, gather_s = 0, decode_s = 0;
};

// One exchange of a fragment with the group. `accumulator`: this replica's e before it (float32, left as it
// is); `delta`: in, this replica's Δ; out, Δ̄ (in its own dtype); `weight`: 1 or 0. Logs refusals naming `what`.
SparseRound sparse_exchange(comm::Group& group, const SparseLayout& layout, const SparseSettings& settings,
                            const AggregationConfig& aggregation, const torch::Tensor& accumulator,
                            torch::Tensor& delta, double weight, bool own_work, const std::string& what);

}  // namespace loco
