#include "loco/comm/piecewise_reduce.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "loco/comm/link/round_size.h"
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

torch::Tensor byte_buffer(std::int64_t bytes) { return torch::empty({bytes}, torch::kUInt8); }

// The rounds of a phase whose largest piece is `largest` bytes: spans [start, start + step) of every
// piece, at least one round (an empty exchange still meets every rank).
struct Rounds {
  std::int64_t step;
  std::int64_t count;
  Rounds(std::int64_t largest, std::int64_t round_bytes) {
    step = round_bytes > 0 ? round_bytes : std::max<std::int64_t>(largest, 1);
    count = std::max<std::int64_t>((largest + step - 1) / step, 1);
  }
  // Bytes of a piece of `bytes` that round `round` carries.
  std::int64_t slice(std::int64_t bytes, std::int64_t round) const {
    return std::clamp<std::int64_t>(bytes - round * step, 0, step);
  }
  std::int64_t start(std::int64_t bytes, std::int64_t round) const { return std::min(round * step, bytes); }
};

// Adds the seconds `run` takes to `total`.
template <typename Run>
void timed(double& total, Run&& run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  total += seconds_since(start);
}

// Puts a round's `part` (`size` blocks of `bytes`, one per source rank, on any device) into the host
// tensor its phase assembles: block r at r·stride + first of `whole`.
void place_by_source(const torch::Tensor& whole, const torch::Tensor& part, std::int64_t stride, std::int64_t first,
                     std::int64_t bytes, int size) {
  const torch::Tensor host = part.to(torch::kCPU);
  for (int source = 0; source < size; ++source) {
    whole.narrow(0, source * stride + first, bytes).copy_(host.narrow(0, source * bytes, bytes));
  }
}

// A started round of a phase: the buffers its collective writes into and reads from, and its handle.
struct OpenRound {
  std::int64_t round;
  torch::Tensor sent, received;
  WorkHandle work;
};

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

// The all-gather phase: every rank's `slot_bytes` of `mine` to every rank, rank r's at r·slot_bytes of
// the result (on the host). A ring all-gather per round.
torch::Tensor gather_slots(Group& group, const torch::Tensor& mine, const Rounds& rounds, int in_flight,
                           Timeout timeout, ExchangeTimes& times) {
  const int size = group.size();
  const std::int64_t slot_bytes = mine.numel();
  if (rounds.count == 1) {  // the common case without a copy
    auto gathered = byte_buffer(slot_bytes * size).to(group.device());
    timed(times.all_gather_s, [&] { group.all_gather(mine.to(group.device()), gathered, timeout); });
    ++times.rounds;
    return gathered.to(torch::kCPU);
  }
  auto gathered = byte_buffer(slot_bytes * size);
  auto start = [&](std::int64_t round) {
    const std::int64_t first = rounds.start(slot_bytes, round), bytes = rounds.slice(slot_bytes, round);
    auto part = byte_buffer(bytes * size).to(group.device());
    auto sent = mine.narrow(0, first, bytes).to(group.device());
    auto work = group.all_gather_async(sent, part, timeout);
    return OpenRound{round, sent, part, work};
  };
  auto finish = [&](OpenRound& open) {
    timed(times.all_gather_s, [&] { open.work->wait(); });
    place_by_source(gathered, open.received, slot_bytes, rounds.start(slot_bytes, open.round),
                    rounds.slice(slot_bytes, open.round), size);
    ++times.rounds;
  };
  run_rounds(rounds.count, in_flight, start, finish);
  return gathered;
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
  const torch::Tensor gathered = gather_slots(group, reduced, ring_rounds, in_flight, timeout, times);
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
