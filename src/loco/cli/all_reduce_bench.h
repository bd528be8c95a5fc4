// `loco bench allreduce`: how long an all-reduce takes on this group, per message size and codec,
// against the ring all-reduce's lower bound on the emulated link, with the result verified against
// an fp64 reference (docs/comm.md explains every field).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loco/comm/group.h"

namespace loco::cli {

struct AllReduceBenchOptions {
  std::vector<std::int64_t> sizes_bytes;  // fp32 payload per rank; rounded down to whole floats
  // Each runs comm::codec_all_reduce, as training does: fp32 on an unpaced group takes the backend's
  // ring, everything else the piecewise exchange paced by the group's GroupOptions::round_size.
  std::vector<std::string> codecs;
  std::size_t block_size = 128;
  int warmup = 1;
  int repeats = 5;
  bool verify = true;
};

// Runs every (size, codec) on `group`; every rank of the group must call it with the same options.
// Returns one JSON row per (size, codec) (the same on every rank). A result outside its error bound
// is marked "verified": false; the caller decides how to fail.
std::vector<nlohmann::ordered_json> run_all_reduce_bench(comm::Group& group, const AllReduceBenchOptions& options);

// "4MB,64KiB,1000" -> bytes (B, KB/MB/GB = 1e3.., KiB/MiB/GiB = 2^10..), each at most kMaxBenchSizeBytes.
// Throws ConfigError.
inline constexpr double kMaxBenchSizeBytes = 0x1p40;
std::vector<std::int64_t> parse_sizes(const std::string& text);

// What one rank certainly holds at once for the largest size: its input and the exchanged copy, and with
// verification the fp64 sum of every rank's input (twice the bytes). sizes_bytes must not be empty.
double bytes_held_per_rank(const AllReduceBenchOptions& options);

}  // namespace loco::cli
