#include "loco/algo/sparse_exchange.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include "loco/algo/robust_aggregation.h"
#include "loco/algo/sparse_aggregation.h"
#include "loco/comm/comm_error.h"
#include "loco/comm/link/link_fit.h"
#include "loco/comm/paced_all_gather.h"
#include "loco/util/error.h"
#include "loco/util/print_unchecked.h"
#include "loco/util/seconds_since.h"

namespace loco {

namespace {

constexpr std::size_t kWeightBytes = sizeof(double);

bool finite(const comm::SparseContribution& c) {
  return std::isfinite(c.shift) && std::all_of(c.lookup.begin(), c.lookup.end(), [](float v) { return std::isfinite(v); });
}

// What one replica sent: its weight and, when it takes part, every tensor's contribution.
struct Received {
  double weight = 0;
  std::vector<comm::SparseContribution> tensors;
};

// Participant `source`'s bytes, decoded; nullopt when no honest replica sends them.
std::optional<Received> decode_payload(const std::uint8_t* bytes, const SparseLayout& layout, int bits) {
  Received out;
  std::memcpy(&out.weight, bytes, kWeightBytes);
  // A replica counts fully or not at all (module comment): any other weight would let one outweigh the rest.
  if (out.weight != 0 && out.weight != 1) return std::nullopt;
  if (out.weight == 0) return out;
  const std::uint8_t* at = bytes + kWeightBytes;
  try {
    for (std::size_t t = 0; t < layout.tilings().size(); ++t) {
      out.tensors.push_back(comm::sparse_decode(at, layout.encoded_bytes(t), layout.tilings()[t], bits));
      at += layout.encoded_bytes(t);
    }
  } catch (const comm::CommError&) {
    return std::nullopt;
  }
  return out;
}

double norm_of(const Received& r) {
  double squares = 0;
  for (const auto& c : r.tensors) {
    for (std::size_t j = 0; j < c.codes.size(); ++j) squares += static_cast<double>(c.decoded(j)) * c.decoded(j);
  }
  return std::sqrt(squares);
}

}  // namespace

SparseLayout::SparseLayout(const std::vector<std::vector<std::int64_t>>& shapes, const SparseSettings& settings)
    : settings_(settings) {
  payload_bytes_ = kWeightBytes;
  for (const auto& shape : shapes) {
    const comm::SparseTiling& tiling = tilings_.emplace_back(shape, settings.topk);
    offsets_.push_back(static_cast<std::size_t>(numel_));
    encoded_.push_back(comm::sparse_encoded_bytes(tiling, settings.bits));
    numel_ += static_cast<std::int64_t>(tiling.numel());
    selected_ += tiling.selected();
    payload_bytes_ += encoded_.back();
  }
}

double SparseLayout::bits_per_index() const {
  // The codec's figure per tensor, weighted by the values each sends.
  double bits = 0;
  for (const comm::SparseTiling& tiling : tilings_)
    bits += comm::sparse_bits_per_index(tiling) * static_cast<double>(tiling.selected());
  return selected_ > 0 ? bits / static_cast<double>(selected_) : 0;
}

std::string SparseLayout::describe() const {
  const double dense = 4.0 * static_cast<double>(numel_);
  // The k a tile sends (SparseTiling's): an odd sparseloco.topk is rounded down to even, said so.
  const std::size_t k = settings_.topk - settings_.topk % 2;
  const std::string rounded =
      k == settings_.topk ? "" : fmt::format(" (sparseloco.topk = {} rounded down to even)", settings_.topk);
  return fmt::format(
      "top-{}{} per tile of up to 64x64 ({:.2f}% of the values), {}-bit values, {:.1f} bits per index, "
      "{} bytes per replica and sync ({:.0f}x fewer than fp32)",
      k, rounded, 100.0 * static_cast<double>(selected_) / static_cast<double>(numel_), settings_.bits,
      bits_per_index(), payload_bytes_, dense / static_cast<double>(payload_bytes_));
}

SparseRound sparse_exchange(comm::Group& group, const SparseLayout& layout, const SparseSettings& settings,
                            const AggregationConfig& aggregation, const torch::Tensor& accumulator,
                            torch::Tensor& delta, double weight, bool own_work, const std::string& what) {
  torch::NoGradGuard no_grad;
  auto started = std::chrono::steady_clock::now();
  LOCO_CHECK(delta.numel() == layout.numel() && accumulator.numel() == layout.numel(),
             "a sparse exchange of {} values for a layout of {}", delta.numel(), layout.numel());
  LOCO_CHECK(weight == 0 || weight == 1, "a sparse contribution of weight {} (0 or 1)", weight);
  const int bits = settings.bits;
  SparseRound round;
  round.accumulator = own_work ? accumulator.to(torch::kFloat32).clone() : torch::zeros_like(accumulator);
  float* e = round.accumulator.data_ptr<float>();
  const torch::Tensor mine = torch::zeros({static_cast<std::int64_t>(layout.payload_bytes())}, torch::kUInt8);
  std::uint8_t* payload = mine.data_ptr<std::uint8_t>();
  const double sent_weight = own_work ? weight : 0.0;
  std::memcpy(payload, &sent_weight, kWeightBytes);
  if (own_work) {
    const torch::Tensor d = delta.to(torch::kFloat32).contiguous();
    const float* own = d.data_ptr<float>();
    const auto beta = static_cast<float>(settings.beta);
    bool diverged = false;
    std::uint8_t* at = payload + kWeightBytes;
    for (std::size_t t = 0; t < layout.tilings().size(); ++t) {
      const comm::SparseTiling& tiling = layout.tilings()[t];
      float* tensor_e = e + layout.offset(t);
      if (weight > 0) {
        const comm::SparseContribution s =
            comm::sparse_error_feedback(tensor_e, own + layout.offset(t), beta, tiling, bits);
        comm::sparse_encode(s, tiling, bits, at);
        diverged = diverged || !finite(s);
      } else {
        // Left out this time: nothing is sent, so everything is carried forward.
        for (std::size_t i = 0; i < tiling.numel(); ++i) tensor_e[i] = tensor_e[i] * beta + own[layout.offset(t) + i];
      }
      at += layout.encoded_bytes(t);
    }
    if (diverged) round.accumulator.zero_();
  }

  round.encode_s = seconds_since(started);

  // Every replica's bytes to every replica.
  const comm::Pacing pacing = group.pacing(group.size());
  const std::int64_t span = pacing.round_bytes * std::max(group.size() - 1, 1);
  comm::GatherTimes times;
  const torch::Tensor gathered = comm::paced_all_gather(group, mine, span, pacing.in_flight, comm::kGroupTimeout, times);
  const auto slot = static_cast<std::int64_t>(layout.payload_bytes());
  if (group.measures_link() && static_cast<double>(slot * (group.size() - 1)) >= comm::LinkFit::kMinSampleBytes) {
    group.learn_link({{static_cast<double>(slot * (group.size() - 1)),
                       comm::LinkFit::waited_rounds(times.rounds, pacing.in_flight) * (group.size() - 1),
                       times.wait_s}});
  }

  round.gather_s = times.wait_s;
  started = std::chrono::steady_clock::now();
  // Decode every replica's, in rank order; refuse what no honest replica sends.
  std::vector<Received> taking_part;
  for (int source = 0; source < group.size(); ++source) {
    std::optional<Received> r = decode_payload(gathered.data_ptr<std::uint8_t>() + source * slot, layout, bits);
    if (!r) {
      round.averaged.rejected.push_back(source);
    } else if (r->weight > 0) {
      round.averaged.weight += 1;
      taking_part.push_back(std::move(*r));
    }
  }
  std::vector<double> factors(taking_part.size(), 1.0);
  if (aggregation.rule == "clip" && !taking_part.empty()) {
    std::vector<double> norms;
    for (const Received& r : taking_part) norms.push_back(norm_of(r));
    const double c = median_of(norms);
    for (std::size_t i = 0; i < norms.size(); ++i) factors[i] = norms[i] > c ? c / norms[i] : 1.0;
  }
  torch::Tensor average = torch::zeros({layout.numel()}, torch::kFloat32);
  for (std::size_t t = 0; t < layout.tilings().size(); ++t) {
    std::vector<const comm::SparseContribution*> from;
    for (const Received& r : taking_part) from.push_back(&r.tensors[t]);
    aggregate_sparse(aggregation, settings.over_contributors, from, factors, layout.tilings()[t],
                     average.data_ptr<float>() + layout.offset(t));
  }
  delta.copy_(average.view(delta.sizes()));
  round.decode_s = seconds_since(started);
  if (!round.averaged.rejected.empty()) {
    loco::print_unchecked(stderr,
                          "{}: the sparse contribution of replica(s) {} did not decode (indices outside a tile, "
                          "duplicated or unsorted, or values that are not finite numbers); left out\n",
                          what, fmt::join(round.averaged.rejected, ", "));
  }
  return round;
}

}  // namespace loco
