#include "loco/comm/piecewise_reduce.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "loco/comm/link/round_size.h"
#include "loco/comm/paced_all_gather.h"
#include "loco/comm/paced_rounds.h"
#include "loco/comm/round_window.h"
#include "loco/util/error.h"
#include "loco/util/seconds_since.h"

namespace loco::comm {

namespace {

// Pieces start on block boundaries so that re-encoding a reduced piece uses the codec's own blocks.
std::vector<std::int64_t> aligned_pieces(std::int64_t count, int parts, std::int64_t alignment) {
  const std::int64_t per_part = (count + parts - 1) / parts;
  const std::int64_t piece = (per_part + alignment - 1) / alignment * alignment;
  std::vector<std::int64_t> pieces;
  std::int64_t remaining = count;
  for (int part = 0; part < parts; ++part) {
    pieces.push_back(std::min(piece, remaining));
    remaining -= pieces.back();
  }
  return pieces;
}

std::vector<std::int64_t> offsets_of(const std::vector<std::int64_t>& sizes) {
  std::vector<std::int64_t> offsets(sizes.size(), 0);
  for (std::size_t i = 1; i < sizes.size(); ++i) offsets[i] = offsets[i - 1] + sizes[i - 1];
  return offsets;
}

std::int64_t encoded(const Codec& codec, std::int64_t count) {
  return static_cast<std::int64_t>(codec.encoded_bytes(static_cast<std::size_t>(count)));
}

// Adds the seconds `run` takes to `total`.
template <typename Run>
void timed(double& total, Run&& run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  total += seconds_since(start);
}

// The reduce-scatter phase's all-to-all: `outgoing` holds piece r (piece_bytes[r] bytes) for every
// rank r, back to back; returns, on the host, this rank's piece from every rank in rank order.
torch::Tensor exchange_pieces(Group& group, const torch::Tensor& outgoing, const std::vector<std::int64_t>& piece_bytes,
                              const Rounds& rounds, int in_flight, Timeout timeout, ExchangeTimes& times) {
  const int size = group.size();
  const std::int64_t mine = piece_bytes[static_cast<std::size_t>(group.rank())];
  auto incoming = byte_buffer(mine * size);
  const auto outgoing_offsets = offsets_of(piece_bytes);
  auto start = [&](std::int64_t round) {
    std::vector<std::int64_t> send_splits, recv_splits;
    std::vector<torch::Tensor> send_parts;
    for (int peer = 0; peer < size; ++peer) {
      const auto p = static_cast<std::size_t>(peer);
      send_splits.push_back(rounds.slice(piece_bytes[p], round));
      send_parts.push_back(
          outgoing.narrow(0, outgoing_offsets[p] + rounds.start(piece_bytes[p], round), send_splits.back()));
      recv_splits.push_back(rounds.slice(mine, round));
    }
    auto received = byte_buffer(rounds.slice(mine, round) * size).to(group.device());
    auto sent = torch::cat(send_parts).to(group.device());
    auto work = group.all_to_all_async(sent, received, send_splits, recv_splits, timeout);
    return OpenRound{round, sent, received, work};
  };
  auto finish = [&](OpenRound& open) {
    timed(times.reduce_scatter_s, [&] { open.work->wait(); });
    place_by_source(incoming, open.received, mine, rounds.start(mine, open.round), rounds.slice(mine, open.round),
                    size);
    ++times.rounds;
  };
  run_rounds(rounds.count, in_flight, start, finish);
  return incoming;
}

}  // namespace

void piecewise_reduce(Group& group, const torch::Tensor& tensor, const Codec& codec, const PieceReduce& reduce,
                      Timeout timeout, ExchangeTimes* times_out) {
  LOCO_CHECK(tensor.scalar_type() == torch::kFloat32, "piecewise_reduce needs float32 values, got {}",
             c10::toString(tensor.scalar_type()));
  const auto started = std::chrono::steady_clock::now();
  ExchangeTimes times;
  const Pacing pacing = group.pacing(group.size());
  times.round_bytes = pacing.round_bytes;
  const int in_flight = pacing.in_flight;
  const int size = group.size();
  const auto me = static_cast<std::size_t>(group.rank());
  auto host = tensor.to(torch::kCPU).contiguous().view({-1});  // a copy only if tensor is elsewhere
  const float* values = host.data_ptr<float>();

  const auto pieces = aligned_pieces(host.numel(), size, static_cast<std::int64_t>(codec.block_size()));
  const auto piece_offsets = offsets_of(pieces);
  std::vector<std::int64_t> piece_bytes;
  for (auto piece : pieces) piece_bytes.push_back(encoded(codec, piece));
  // A ring all-gather needs equal sizes, so the all-gather phase pads pieces to the largest (a few
  // bytes for large tensors; counted as sent).
  const std::int64_t slot_bytes = *std::max_element(piece_bytes.begin(), piece_bytes.end());
  const Rounds rounds(slot_bytes, times.round_bytes);
  // An all-to-all round puts R on each of N − 1 links at once; a ring round's N − 1 steps each put its
  // span on one link, so its span is R·(N − 1) and each step is as long as an all-to-all round (with
  // spans of R, 8 ranks spent most of a round between steps: docs/results.md, "Pacing").
  const Rounds ring_rounds(slot_bytes, times.round_bytes * std::max(size - 1, 1));

  // 2. Reduce-scatter phase: piece r of every rank goes to rank r.
  auto outgoing = byte_buffer(std::accumulate(piece_bytes.begin(), piece_bytes.end(), std::int64_t{0}));
  const auto outgoing_offsets = offsets_of(piece_bytes);
  for (std::size_t piece = 0; piece < pieces.size(); ++piece) {
    codec.encode(values + piece_offsets[piece], static_cast<std::size_t>(pieces[piece]),
                 outgoing.data_ptr<std::uint8_t>() + outgoing_offsets[piece]);
  }
  const torch::Tensor incoming = exchange_pieces(group, outgoing, piece_bytes, rounds, in_flight, timeout, times);

  // 3. Reduce my piece from every rank's contribution.
  auto reduced_piece = torch::zeros({pieces[me]}, torch::kFloat32);
  reduce({incoming.data_ptr<std::uint8_t>(), size, piece_bytes[me], pieces[me]}, reduced_piece.data_ptr<float>());

  // 4. All-gather phase: my reduced piece, encoded once, to every rank; decode every piece. Over
  // tc-shaped links Gloo's ring measured faster than its all-to-all for this phase (docs/results.md,
  // "Collectives").
  auto reduced = torch::zeros({slot_bytes}, torch::kUInt8);
  codec.encode(reduced_piece.data_ptr<float>(), static_cast<std::size_t>(pieces[me]), reduced.data_ptr<std::uint8_t>());
  GatherTimes gather;
  const torch::Tensor gathered =
      paced_all_gather(group, reduced, ring_rounds.step, in_flight, timeout, gather);
  times.rounds += gather.rounds;
  times.all_gather_s += gather.wait_s;
  float* result = host.data_ptr<float>();
  for (std::size_t piece = 0; piece < pieces.size(); ++piece) {
    codec.decode(gathered.data_ptr<std::uint8_t>() + static_cast<std::int64_t>(piece) * slot_bytes,
                 static_cast<std::size_t>(pieces[piece]), result + piece_offsets[piece]);
  }
  if (!host.is_alias_of(tensor)) tensor.copy_(host.view(tensor.sizes()));
  // Note "measured-link": each phase is a sample when it is large enough (a test every rank answers alike).
  if (group.measures_link() && static_cast<double>(slot_bytes * (size - 1)) >= LinkFit::kMinSampleBytes) {
    double sent = 0;
    for (int peer = 0; peer < size; ++peer) {
      if (peer != group.rank()) sent += static_cast<double>(piece_bytes[static_cast<std::size_t>(peer)]);
    }
    group.learn_link({{sent, LinkFit::waited_rounds(rounds.count, in_flight), times.reduce_scatter_s},
                      {static_cast<double>(slot_bytes * (size - 1)),
                       LinkFit::waited_rounds(ring_rounds.count, in_flight) * (size - 1), times.all_gather_s}},
                     timeout);
  }
  if (times_out != nullptr) {
    times.compute_s = seconds_since(started) - times.reduce_scatter_s - times.all_gather_s;
    *times_out = times;
  }
}

}  // namespace loco::comm
