#include "loco/comm/piecewise_reduce.h"

#include <algorithm>
#include <numeric>

#include "loco/util/error.h"

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

// The reduce-scatter phase's all-to-all: `outgoing` holds piece r (piece_bytes[r] bytes) for every
// rank r, back to back; returns, on the host, this rank's piece from every rank in rank order. With
// round_bytes > 0 it runs in rounds of at most round_bytes per peer (note "paced-exchange" in the
// header); every rank computes the same number of rounds from the same piece sizes.
torch::Tensor exchange_pieces(Group& group, const torch::Tensor& outgoing, const std::vector<std::int64_t>& piece_bytes,
                              std::int64_t round_bytes, Timeout timeout) {
  const int size = group.size();
  const std::int64_t mine = piece_bytes[static_cast<std::size_t>(group.rank())];
  auto incoming = byte_buffer(mine * size);
  const auto outgoing_offsets = offsets_of(piece_bytes);
  const std::int64_t largest = *std::max_element(piece_bytes.begin(), piece_bytes.end());
  const std::int64_t step = round_bytes > 0 ? round_bytes : std::max<std::int64_t>(largest, 1);
  for (std::int64_t start = 0; start < std::max<std::int64_t>(largest, 1); start += step) {
    auto slice = [&](std::int64_t bytes) { return std::clamp<std::int64_t>(bytes - start, 0, step); };
    std::vector<std::int64_t> send_splits, recv_splits;
    std::vector<torch::Tensor> send_parts;
    for (int peer = 0; peer < size; ++peer) {
      const auto p = static_cast<std::size_t>(peer);
      send_splits.push_back(slice(piece_bytes[p]));
      send_parts.push_back(
          outgoing.narrow(0, outgoing_offsets[p] + std::min(start, piece_bytes[p]), send_splits.back()));
      recv_splits.push_back(slice(mine));
    }
    auto received = byte_buffer(slice(mine) * size).to(group.device());
    group.all_to_all(torch::cat(send_parts).to(group.device()), received, send_splits, recv_splits, timeout);
    received = received.to(torch::kCPU);
    for (int source = 0; source < size; ++source) {
      incoming.narrow(0, source * mine + std::min(start, mine), slice(mine))
          .copy_(received.narrow(0, source * slice(mine), slice(mine)));
    }
  }
  return incoming;
}

}  // namespace

void piecewise_reduce(Group& group, const torch::Tensor& tensor, const Codec& codec, const PieceReduce& reduce,
                      Timeout timeout, std::int64_t round_bytes) {
  LOCO_CHECK(tensor.scalar_type() == torch::kFloat32, "piecewise_reduce needs float32 values, got {}",
             c10::toString(tensor.scalar_type()));
  const int size = group.size();
  const auto me = static_cast<std::size_t>(group.rank());
  auto host = tensor.to(torch::kCPU).contiguous().view({-1});  // a copy only if tensor is elsewhere
  const float* values = host.data_ptr<float>();

  const auto pieces = aligned_pieces(host.numel(), size, static_cast<std::int64_t>(codec.block_size()));
  const auto piece_offsets = offsets_of(pieces);
  std::vector<std::int64_t> piece_bytes;
  for (auto piece : pieces) piece_bytes.push_back(encoded(codec, piece));
  auto on_group_device = [&](const torch::Tensor& bytes) { return bytes.to(group.device()); };

  // 2. Reduce-scatter phase: piece r of every rank goes to rank r.
  auto outgoing = byte_buffer(std::accumulate(piece_bytes.begin(), piece_bytes.end(), std::int64_t{0}));
  const auto outgoing_offsets = offsets_of(piece_bytes);
  for (std::size_t piece = 0; piece < pieces.size(); ++piece) {
    codec.encode(values + piece_offsets[piece], static_cast<std::size_t>(pieces[piece]),
                 outgoing.data_ptr<std::uint8_t>() + outgoing_offsets[piece]);
  }
  const torch::Tensor incoming = exchange_pieces(group, outgoing, piece_bytes, round_bytes, timeout);

  // 3. Reduce my piece from every rank's contribution.
  auto reduced_piece = torch::zeros({pieces[me]}, torch::kFloat32);
  reduce({incoming.data_ptr<std::uint8_t>(), size, piece_bytes[me], pieces[me]}, reduced_piece.data_ptr<float>());

  // 4. All-gather phase: my reduced piece, encoded once, to every rank; decode every piece. A ring
  // all-gather needs equal sizes, so pieces are padded to the largest (a few bytes for large tensors;
  // counted as sent). Over tc-shaped links Gloo's ring measured faster than its all-to-all for this
  // phase (docs/results.md, "Collectives").
  const std::int64_t slot_bytes = *std::max_element(piece_bytes.begin(), piece_bytes.end());
  auto reduced = torch::zeros({slot_bytes}, torch::kUInt8);
  codec.encode(reduced_piece.data_ptr<float>(), static_cast<std::size_t>(pieces[me]), reduced.data_ptr<std::uint8_t>());
  auto gathered = on_group_device(byte_buffer(slot_bytes * size));
  group.all_gather(on_group_device(reduced), gathered, timeout);
  gathered = gathered.to(torch::kCPU);
  float* result = host.data_ptr<float>();
  for (std::size_t piece = 0; piece < pieces.size(); ++piece) {
    codec.decode(gathered.data_ptr<std::uint8_t>() + static_cast<std::int64_t>(piece) * slot_bytes,
                 static_cast<std::size_t>(pieces[piece]), result + piece_offsets[piece]);
  }
  if (!host.is_alias_of(tensor)) tensor.copy_(host.view(tensor.sizes()));
}

}  // namespace loco::comm
