#include "loco/cli/all_reduce_bench.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "loco/comm/codecs/codec.h"
#include "loco/comm/quantized_all_reduce.h"
#include "loco/util/error.h"
#include "loco/util/parse_number.h"
#include "loco/util/seconds_since.h"

namespace loco::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Rank r's input for a given size: standard normal values from a seed every rank can recompute.
torch::Tensor bench_input(int rank, std::int64_t count) {
  auto generator = at::detail::createCPUGenerator(static_cast<std::uint64_t>(rank) * 1000003u + count);
  return torch::randn({count}, generator, torch::kFloat32);
}

// What every rank's input adds up to, for one size: computed once and checked against every codec.
struct Reference {
  torch::Tensor exact_sum;     // fp64
  std::vector<double> absmax;  // per rank
};

Reference reference_for(int world_size, std::int64_t count) {
  Reference reference{torch::zeros({count}, torch::kFloat64), {}};
  for (int rank = 0; rank < world_size; ++rank) {
    const auto input = bench_input(rank, count);
    reference.exact_sum += input.to(torch::kFloat64);
    reference.absmax.push_back(input.abs().max().item<double>());
  }
  return reference;
}

struct Verification {
  double max_abs_err = 0;
  double bound = 0;
};

// The bound: each contribution's codec error at its absmax, fp32 rounding of the N additions, and
// the re-encoded sum's codec error. codec is null for the backend's own fp32 all-reduce.
Verification verify(const Reference& reference, const comm::Codec* codec, const torch::Tensor& result) {
  double bound = 0, absmax_sum = 0;
  for (const double absmax : reference.absmax) {
    absmax_sum += absmax;
    if (codec != nullptr) bound += comm::worst_error_in_block(*codec, absmax);
  }
  bound += (reference.absmax.size() + 1) * 0x1p-24 * (absmax_sum + bound);
  if (codec != nullptr) bound += comm::worst_error_in_block(*codec, absmax_sum + bound);
  return {(result.to(torch::kCPU, torch::kFloat64) - reference.exact_sum).abs().max().item<double>(), bound};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 == 1 ? values[middle] : 0.5 * (values[middle - 1] + values[middle]);
}

// The slowest rank decides how long a collective took.
double slowest(comm::Group& group, double seconds) {
  auto value = torch::tensor({seconds}, torch::kFloat64).to(group.device());
  auto all = torch::empty({group.size()}, value.options());
  group.all_gather(value, all);
  return all.max().item<double>();
}

}  // namespace

std::vector<std::int64_t> parse_sizes(const std::string& text) {
  std::vector<std::int64_t> sizes;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    const auto number = parse_leading_number(item);
    const std::string unit = number ? item.substr(number->used) : "";
    static const std::vector<std::pair<std::string, double>> units = {
        {"", 1},          {"B", 1},         {"KB", 1e3},      {"MB", 1e6},    {"GB", 1e9},
        {"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}};
    const auto found = std::find_if(units.begin(), units.end(), [&](const auto& u) { return u.first == unit; });
    if (number && number->value >= 0 && found == units.end()) {
      std::vector<std::string> names;
      for (const auto& u : units) {
        if (!u.first.empty()) names.push_back(u.first);
      }
      throw ConfigError(
          fmt::format("size '{}' in '{}' has the unit '{}', which is none of {}: write e.g. 64KiB, "
                      "4MB or 1GiB (sizes beyond 1 TiB per rank are refused)",
                      item, text, unit, fmt::join(names, ", ")));
    }
    if (!number || found == units.end() || number->value < 0) {
      throw ConfigError(
          fmt::format("size '{}' in '{}' is not a byte count: write e.g. 1000, 64KiB, 4MB or 1GiB.", item, text));
    }
    // Checked before the conversion: 2^64 bytes became a negative tensor size.
    const double bytes = number->value * found->second;
    if (!(bytes <= kMaxBenchSizeBytes)) {
      throw ConfigError(
          fmt::format("size '{}' in '{}' is more than 1 TiB per rank, beyond any machine's memory: "
                      "give sizes such as 4MB or 1GiB.",
                      item, text));
    }
    // The message is float32 values: below 4 bytes it held none, and the bench timed nothing.
    if (bytes < 4) {
      throw ConfigError(fmt::format(
          "size '{}' in '{}' is less than one float32 value (4 bytes): give sizes of 4 bytes or more, e.g. 4KB", item,
          text));
    }
    sizes.push_back(static_cast<std::int64_t>(bytes));
  }
  if (sizes.empty()) throw ConfigError("--sizes is empty: give one or more sizes, e.g. --sizes 1MB,4MB,64MB");
  return sizes;
}

double bytes_held_per_rank(const AllReduceBenchOptions& options) {
  const std::int64_t largest = *std::max_element(options.sizes_bytes.begin(), options.sizes_bytes.end());
  return static_cast<double>(largest) * (options.verify ? 4 : 2);
}

std::vector<nlohmann::ordered_json> run_all_reduce_bench(comm::Group& group, const AllReduceBenchOptions& options) {
  const int size = group.size();
  const comm::LinkModel& link = group.options().link;
  std::vector<nlohmann::ordered_json> rows;
  for (const auto size_bytes : options.sizes_bytes) {
    const std::int64_t count = size_bytes / 4;
    const auto input = bench_input(group.rank(), count).to(group.device());  // NCCL: on the GPU
    const Reference reference = options.verify && count > 0 ? reference_for(size, count) : Reference{};
    for (const auto& codec_name : options.codecs) {
      const auto codec = comm::make_codec(codec_name, options.block_size);
      auto work = input.clone();
      comm::CommStats op_cost;      // bytes and emulated time of the measured operation alone
      comm::ExchangeTimes phases;  // where the piecewise exchange's time went
      auto run_once = [&] {
        work.copy_(input);
        group.barrier();
        const comm::CommStats before = group.stats();
        const auto start = Clock::now();
        comm::codec_all_reduce(group, work, codec.get(), comm::ReduceOp::sum, &phases);
        const double seconds = seconds_since(start);
        const comm::CommStats after = group.stats();
        op_cost = {after.bytes_sent - before.bytes_sent, after.bytes_recv - before.bytes_recv,
                   after.operations - before.operations, 0, after.emulated_s - before.emulated_s};
        return seconds;
      };
      for (int i = 0; i < options.warmup; ++i) run_once();
      // After the warm-up: a group that measures its link (note "measured-link") paces from then on.
      const bool ring = comm::uses_backend_ring(group, codec.get(), count * 4);
      std::vector<double> times, scatter, gather, compute;
      for (int i = 0; i < options.repeats; ++i) {
        times.push_back(slowest(group, run_once()));
        scatter.push_back(slowest(group, phases.reduce_scatter_s));
        gather.push_back(slowest(group, phases.all_gather_s));
        compute.push_back(slowest(group, phases.compute_s));
      }
      const double time_s = median(times);
      const double ring_factor = size > 1 ? 2.0 * (size - 1) / size : 0.0;
      const double algbw_gbps = time_s > 0 ? 8.0 * static_cast<double>(count * 4) / time_s / 1e9 : 0.0;
      nlohmann::ordered_json row = {{"size_bytes", count * 4},
                                    {"codec", codec_name},
                                    {"backend", group.backend()},
                                    {"nproc", size},
                                    {"path", ring ? "ring" : "pieces"},
                                    {"time_s", time_s},
                                    {"algbw_gbps", algbw_gbps},
                                    {"busbw_gbps", algbw_gbps * ring_factor},
                                    {"wire_bytes", op_cost.bytes_sent},
                                    {"emulated_s", op_cost.emulated_s}};
      // The ring all-reduce's lower bound on the slowest link, at the codec's encoded size.
      const double bandwidth = link.slowest_bandwidth_bps();
      const int rounds = ring ? 2 * (size - 1) : (size > 1 ? size : 0);  // all-to-all, then ring all-gather
      row["bound_s"] = bandwidth > 0
                           ? nlohmann::ordered_json(ring_factor * 8.0 * codec->encoded_bytes(count) / bandwidth +
                                                    rounds * link.highest_latency_s())
                           : nlohmann::ordered_json(nullptr);
      row["time_over_bound"] = bandwidth > 0 ? nlohmann::ordered_json(time_s / row["bound_s"].get<double>())
                                             : nlohmann::ordered_json(nullptr);
      if (const auto measured = group.measured_link().estimate()) {
        row["measured_mbps"] = measured->bandwidth_bps / 1e6;
        row["measured_latency_ms"] = measured->latency_s * 1e3;
      }
      if (!ring) {  // medians over the repeats of the slowest rank's seconds per phase
        row["round_kib"] = static_cast<double>(phases.round_bytes) / 1024;
        row["rounds"] = phases.rounds;
        row["reduce_scatter_s"] = median(scatter);
        row["all_gather_s"] = median(gather);
        row["compute_s"] = median(compute);
      }
      if (options.verify && count > 0) {
        const auto check = verify(reference, ring ? nullptr : codec.get(), work);
        row["max_abs_err"] = check.max_abs_err;
        row["err_bound"] = check.bound;
        row["verified"] = check.max_abs_err <= check.bound;
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace loco::cli
