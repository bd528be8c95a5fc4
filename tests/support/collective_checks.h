// Collectives with known answers, written once and run on every backend: in-process on LocalGroup
// threads (tests/torch/comm_local_group_test.cpp) and across processes on C10dGroup
// (tests/comm/gloo_worker_test.cpp, started by `loco launch`). Every rank of a group calls the same
// check with the same arguments; results are checked with GoogleTest assertions on every rank.
//
// Rank r's input element i is (r + 1)·1000 + i mod 997: integers, so sums are exact in fp32 and
// every backend must agree to the bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loco/comm/group.h"

namespace loco::test {

// The element counts every check runs with: empty, one, not divisible by any world size used, large.
std::vector<std::int64_t> collective_counts();

void check_all_reduce(comm::Group& group, std::int64_t count);
void check_all_gather(comm::Group& group, std::int64_t count);
void check_reduce_scatter(comm::Group& group, std::int64_t count);
void check_all_to_all(comm::Group& group, std::int64_t count);
void check_broadcast(comm::Group& group, std::int64_t count);
void check_send_recv_ring(comm::Group& group, std::int64_t count);
void check_async_out_of_order(comm::Group& group, std::int64_t count);
// Every check above for every count of collective_counts().
void check_every_collective(comm::Group& group);
// Quantised all-reduce of seeded random data (the same on every backend): within the codec's bound
// of the fp64 sum, identical on every rank, and moving the expected bytes. Returns the result.
torch::Tensor check_quantized_all_reduce(comm::Group& group, const std::string& codec, std::int64_t count);

}  // namespace loco::test
