#include "support/collective_checks.h"

#include <gtest/gtest.h>

#include "loco/comm/codecs/codec.h"
#include "loco/comm/local/local_group.h"
#include "loco/comm/quantized_all_reduce.h"

namespace loco::test {

namespace {

// Rank r's input: (r + 1)·1000 + i mod 997, plus `salt` to tell inputs of different calls apart.
torch::Tensor known_input(int rank, std::int64_t count, float salt = 0) {
  auto index = torch::arange(count, torch::kFloat64);
  return ((rank + 1) * 1000.0 + index.fmod(997) + salt).to(torch::kFloat32);
}

torch::Tensor known_sum(int world_size, std::int64_t count, float salt = 0) {
  auto sum = torch::zeros({count}, torch::kFloat64);
  for (int rank = 0; rank < world_size; ++rank) sum += known_input(rank, count, salt).to(torch::kFloat64);
  return sum.to(torch::kFloat32);
}

void expect_equal(const torch::Tensor& actual, const torch::Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.numel(), expected.numel()) << what;
  EXPECT_TRUE(torch::equal(actual.view({-1}), expected.view({-1})))
      << what << ": largest difference " << (actual.view({-1}) - expected.view({-1})).abs().max().item<float>();
}

std::string where(const comm::Group& group, std::int64_t count) {
  return group.backend() + " rank " + std::to_string(group.rank()) + "/" + std::to_string(group.size()) + ", count " +
         std::to_string(count);
}

// Elements rank `source` sends to rank `destination` in check_all_to_all: uneven, some zero.
std::int64_t piece(int source, int destination, std::int64_t count) {
  return (count * (source + 2 * destination + 1)) % 5 + (count > 3 ? count / 3 : 0) * ((source + destination) % 2);
}

constexpr std::int64_t kBlock = 128;

}  // namespace

std::vector<std::int64_t> collective_counts() { return {0, 1, 1009, (1 << 18) + 3}; }

void check_all_reduce(comm::Group& group, std::int64_t count) {
  auto tensor = known_input(group.rank(), count);
  const auto before = group.stats();
  group.all_reduce(tensor);
  expect_equal(tensor, known_sum(group.size(), count), "all_reduce sum, " + where(group, count));

  const auto traffic = comm::ring_all_reduce_traffic(static_cast<std::uint64_t>(count) * 4, group.size());
  EXPECT_EQ(group.stats().bytes_sent - before.bytes_sent, traffic.bytes_sent) << where(group, count);
  EXPECT_EQ(group.stats().bytes_recv - before.bytes_recv, traffic.bytes_recv) << where(group, count);

  auto for_mean = known_input(group.rank(), count, 0.5f);
  group.all_reduce(for_mean, comm::ReduceOp::mean);
  expect_equal(for_mean, known_sum(group.size(), count, 0.5f) / group.size(),
               "all_reduce mean, " + where(group, count));
}

void check_all_gather(comm::Group& group, std::int64_t count) {
  auto output = torch::full({count * group.size()}, -1.0f);
  group.all_gather(known_input(group.rank(), count), output);
  std::vector<torch::Tensor> expected;
  for (int rank = 0; rank < group.size(); ++rank) expected.push_back(known_input(rank, count));
  expect_equal(output, torch::cat(expected), "all_gather, " + where(group, count));
}

void check_reduce_scatter(comm::Group& group, std::int64_t count) {
  const auto pieces = comm::even_split(count, group.size());
  std::int64_t offset = 0;
  for (int rank = 0; rank < group.rank(); ++rank) offset += pieces[static_cast<std::size_t>(rank)];
  const std::int64_t mine = pieces[static_cast<std::size_t>(group.rank())];
  auto output = torch::full({mine}, -1.0f);
  group.reduce_scatter(known_input(group.rank(), count), output);
  expect_equal(output, known_sum(group.size(), count).narrow(0, offset, mine),
               "reduce_scatter, " + where(group, count));
}

void check_all_to_all(comm::Group& group, std::int64_t count) {
  // Element k of the piece from s to d holds s·1e6 + d·1e4 + k mod 1e4: its origin is visible.
  const int me = group.rank();
  auto piece_values = [](int source, int destination, std::int64_t n) {
    return (torch::arange(n, torch::kFloat64).fmod(10000) + source * 1e6 + destination * 1e4).to(torch::kFloat32);
  };
  std::vector<std::int64_t> input_splits, output_splits;
  std::vector<torch::Tensor> input_pieces, expected_pieces;
  for (int peer = 0; peer < group.size(); ++peer) {
    input_splits.push_back(piece(me, peer, count));
    output_splits.push_back(piece(peer, me, count));
    input_pieces.push_back(piece_values(me, peer, input_splits.back()));
    expected_pieces.push_back(piece_values(peer, me, output_splits.back()));
  }
  auto expected = torch::cat(expected_pieces);
  auto output = torch::full({expected.numel()}, -1.0f);
  group.all_to_all(torch::cat(input_pieces), output, input_splits, output_splits);
  expect_equal(output, expected, "all_to_all, " + where(group, count));
}

void check_broadcast(comm::Group& group, std::int64_t count) {
  const int root = group.size() - 1;
  auto tensor = known_input(group.rank(), count);
  group.broadcast(tensor, root);
  expect_equal(tensor, known_input(root, count), "broadcast, " + where(group, count));
}

void check_send_recv_ring(comm::Group& group, std::int64_t count) {
  if (group.size() < 2) return;
  const int next = (group.rank() + 1) % group.size();
  const int previous = (group.rank() + group.size() - 1) % group.size();
  // Two messages on one channel and one on another tag: each receive gets its own, in order.
  auto first = torch::empty({count}), second = torch::empty({count}), tagged = torch::empty({count});
  auto receive_first = group.recv_async(first, previous);
  auto receive_tagged = group.recv_async(tagged, previous, 7);
  auto receive_second = group.recv_async(second, previous);
  auto send_first = group.send_async(known_input(group.rank(), count, 1), next);
  auto send_second = group.send_async(known_input(group.rank(), count, 2), next);
  auto send_tagged = group.send_async(known_input(group.rank(), count, 7), next, 7);
  for (auto* work : {&send_first, &send_second, &send_tagged, &receive_second, &receive_tagged, &receive_first}) {
    (*work)->wait();
  }
  expect_equal(first, known_input(previous, count, 1), "recv #1, " + where(group, count));
  expect_equal(second, known_input(previous, count, 2), "recv #2, " + where(group, count));
  expect_equal(tagged, known_input(previous, count, 7), "recv tag 7, " + where(group, count));
}

void check_async_out_of_order(comm::Group& group, std::int64_t count) {
  std::vector<torch::Tensor> tensors;
  std::vector<comm::WorkHandle> works;
  for (int call = 0; call < 3; ++call) {
    tensors.push_back(known_input(group.rank(), count, static_cast<float>(call)));
    works.push_back(group.all_reduce_async(tensors.back()));
  }
  group.barrier();
  for (int call = 2; call >= 0; --call) works[static_cast<std::size_t>(call)]->wait();
  for (int call = 0; call < 3; ++call) {
    expect_equal(tensors[static_cast<std::size_t>(call)], known_sum(group.size(), count, static_cast<float>(call)),
                 "async all_reduce #" + std::to_string(call) + ", " + where(group, count));
  }
}

void check_every_collective(comm::Group& group) {
  for (auto count : collective_counts()) {
    check_all_reduce(group, count);
    check_all_gather(group, count);
    check_reduce_scatter(group, count);
    check_all_to_all(group, count);
    check_broadcast(group, count);
    check_send_recv_ring(group, count);
    check_async_out_of_order(group, count);
    group.barrier();
  }
}

torch::Tensor check_quantized_all_reduce(comm::Group& group, const std::string& codec_name, std::int64_t count) {
  const auto codec = comm::make_codec(codec_name);
  // Heavy-tailed values of different magnitudes per rank: codecs with block scales must cope.
  auto input_of = [count](int rank) {
    auto generator = at::detail::createCPUGenerator(1234 + static_cast<std::uint64_t>(rank));
    auto normal = torch::randn({count}, generator, torch::kFloat32);
    return normal * normal.abs() * std::pow(10.0, rank % 3 - 1);
  };
  auto tensor = input_of(group.rank());
  const auto before = group.stats();
  comm::quantized_all_reduce(group, tensor, *codec);
  const auto sent = group.stats().bytes_sent - before.bytes_sent;

  // Worst-case error per block of 128 values (the codec's block and the pieces' alignment): each
  // rank's contribution is off by at most the codec's bound for that block's largest value, and the
  // re-encoded sum by the bound for the sum's block (its absmax is at most the sum of theirs).
  auto exact = torch::zeros({count}, torch::kFloat64);
  const std::int64_t blocks = (count + kBlock - 1) / kBlock;
  std::vector<double> bound(static_cast<std::size_t>(blocks), 0.0), sum_absmax(bound.size(), 0.0);
  for (int rank = 0; rank < group.size(); ++rank) {
    const auto input = input_of(rank);
    exact += input.to(torch::kFloat64);
    for (std::int64_t block = 0; block < blocks; ++block) {
      const auto values = input.narrow(0, block * kBlock, std::min(kBlock, count - block * kBlock));
      const double absmax = values.abs().max().item<double>();
      bound[static_cast<std::size_t>(block)] += worst_error_in_block(*codec, absmax);
      sum_absmax[static_cast<std::size_t>(block)] += absmax;
    }
  }
  for (std::int64_t block = 0; block < blocks; ++block) {
    const auto b = static_cast<std::size_t>(block);
    // fp32 additions of the decoded contributions round too: at most one unit in the last place
    // (2^-24 relative) of the running sum per addition.
    const double summation = (group.size() + 1) * 0x1p-24 * (sum_absmax[b] + bound[b]);
    bound[b] += summation + worst_error_in_block(*codec, sum_absmax[b] + bound[b] + summation);
  }
  auto element_bound = torch::tensor(bound, torch::kFloat64).repeat_interleave(kBlock).narrow(0, 0, count);
  const auto error = (tensor.to(torch::kFloat64) - exact).abs();
  const std::string what = "quantized_all_reduce " + codec_name + ", " + where(group, count);
  if (count > 0) {
    EXPECT_TRUE((error <= element_bound).all().item<bool>())
        << what << ": worst error/bound " << (error / element_bound.clamp_min(1e-300)).max().item<double>();
    // Typical errors are far inside the worst case; a flipped sign or a lost contribution is not.
    const double relative = (error.norm() / exact.norm().clamp_min(1e-30)).item<double>();
    EXPECT_LT(relative, codec_name == "fp32" ? 1e-6 : codec_name == "bf16" ? 1e-2 : 0.3) << what;
  }
  if (codec_name == "fp32" && count > 0) {
    // Summed in fp32 in rank order: exactly what a plain fp32 loop gives.
    auto in_order = torch::zeros({count});
    for (int rank = 0; rank < group.size(); ++rank) in_order += input_of(rank);
    expect_equal(tensor, in_order, what);
  }
  // Every rank holds the same values: compare against rank 0's by broadcast.
  auto from_rank0 = tensor.clone();
  group.broadcast(from_rank0, 0);
  expect_equal(tensor, from_rank0, what + " (rank 0's copy)");
  // Bytes: ≈ 2·(N−1)/N of the encoded tensor. Pieces start on 128-value blocks, so small tensors
  // split unevenly (1009 values on 5 ranks: 256, 256, 256, 241, 0); large ones are within 2%.
  if (group.size() > 1 && count > 100000) {
    const double ring = 2.0 * (group.size() - 1) / group.size() * codec->encoded_bytes(static_cast<std::size_t>(count));
    EXPECT_NEAR(static_cast<double>(sent), ring, 0.02 * ring + 64.0 * group.size()) << what;
  }
  return tensor;
}

}  // namespace loco::test
