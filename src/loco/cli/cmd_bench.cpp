// `loco bench allreduce`: all-reduce time per message size and codec, in one process (local) or
// across processes (gloo), against the ring lower bound on an emulated or shaped link, with every
// result verified against fp64 (src/loco/cli/all_reduce_bench.h; docs/comm.md).
//
// --backend gloo starts its own ranks through the launcher unless it already runs as one rank
// (RANK/WORLD_SIZE set by loco launch, torchrun, Slurm or scripts/netns_run.sh).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <optional>

#include "loco/cli/all_reduce_bench.h"
#include "loco/cli/commands.h"
#include "loco/cli/usage.h"
#include "loco/comm/c10d/connect.h"
#include "loco/comm/c10d/rank_environment.h"
#include "loco/comm/codecs/codec.h"
#include "loco/comm/local/local_group.h"
#include "loco/config/config_keys.h"
#include "loco/config/dist_checks.h"
#include "loco/config/load_config.h"
#include "loco/launch/launcher.h"
#include "loco/train/memory_need.h"
#include "loco/train/runtime.h"
#include "loco/util/error.h"
#include "loco/util/seconds_since.h"

namespace loco::cli {

namespace {

struct BenchAllReduceOptions {
  std::string backend = "local";
  int nproc = 2;
  std::string sizes = "1MB,4MB,16MB";
  std::string codecs = "fp32,bf16,int8,fp4,int4";
  std::size_t block_size = 128;
  bool block_size_given = false;  // --block-size was given, not its default (read by the callback)
  std::string round_kib = "auto";
  std::string bandwidth_mbps;
  std::string latency_ms;
  std::string delay = "none";
  int repeats = 5;
  int warmup = 1;
  bool no_verify = false;
  double timeout_s = 300;
  int threads = 1;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find(',', start), text.size());
    items.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

void print_rows(const std::vector<nlohmann::ordered_json>& rows) {
  bool all_verified = true;
  for (const auto& row : rows) {
    std::cout << row.dump() << std::endl;
    if (row.contains("verified") && !row["verified"].get<bool>()) all_verified = false;
  }
  if (!all_verified) {
    throw InternalError(
        "an all-reduce result is outside its error bound (rows with \"verified\": false): a bug in "
        "loco's communication layer; please report it with the command line");
  }
}

void run_bench(const BenchAllReduceOptions& o, const std::vector<std::string>& original_args) {
  AllReduceBenchOptions bench;
  bench.sizes_bytes = parse_sizes(o.sizes);
  bench.codecs = split_list(o.codecs);
  for (const auto& codec : bench.codecs) comm::make_codec(codec, o.block_size);  // names checked up front
  // Options read only beside another (before: accepted, and nothing read them), as train names its settings.
  const bool quantises = std::any_of(bench.codecs.begin(), bench.codecs.end(), quantising_codec);
  if (o.block_size_given && !quantises) {
    throw ConfigError(
        fmt::format("--block-size sizes the scale blocks of int8, fp4 and int4, and --codec {} has none "
                    "of them: drop --block-size, or add such a codec",
                    o.codecs));
  }
  if (comm::parse_link_delay(o.delay, "--delay") != comm::LinkDelay::none && o.bandwidth_mbps.empty() &&
      o.latency_ms.empty()) {
    throw ConfigError(
        fmt::format("--delay {} shows an emulated link in real time, and no --bandwidth-mbps or "
                    "--latency-ms emulates one: give one, or drop --delay",
                    o.delay));
  }
  bench.block_size = o.block_size;
  bench.repeats = o.repeats;
  bench.warmup = o.warmup;
  bench.verify = !o.no_verify;
  // A median of ten thousand repetitions is as good as any: more only runs for days.
  if (o.repeats < 1 || o.repeats > 10000 || o.warmup < 0 || o.warmup > 10000) {
    throw ConfigError(fmt::format("--repeats {} / --warmup {}: give 1 to 10000 repetitions and 0 to 10000 warm-ups.",
                                  o.repeats, o.warmup));
  }
  // The ranks are threads of this process, each with its own connections: a thousand is far past any bench.
  if (o.nproc < 1 || o.nproc > 1024) {
    throw ConfigError(fmt::format("--nproc {}: give 1 to 1024 ranks.", o.nproc));
  }
  if (!(o.timeout_s > 0) || o.timeout_s > kLongestWaitSeconds) {
    throw ConfigError(fmt::format("--timeout-s {}: give a positive number of seconds, at most {:.0f}.", o.timeout_s,
                                  kLongestWaitSeconds));
  }
  if (o.threads < 1 || o.threads > kMostThreads) {
    throw ConfigError(fmt::format("--threads {}: give 1 to {} threads per rank.", o.threads, kMostThreads));
  }
  // On the CPU memory is overcommitted: sizes beyond the machine are refused here, as train refuses a batch
  // beyond it, rather than grown until the kernel kills the process. The local backend's ranks are threads
  // of this process; another backend's are one process each, maybe on other machines.
  const int ranks_here = o.backend == "local" ? o.nproc : 1;
  const double need = bytes_held_per_rank(bench) * ranks_here;
  if (const double usable = usable_host_memory_bytes(); need > usable) {
    throw ConfigError(fmt::format(
        "--sizes {}: {} rank(s) in this process hold at least {:.1f} GiB for the largest size (its input and the "
        "exchanged copy{}), more than the {:.1f} GiB available to this process. Give smaller --sizes{}",
        o.sizes, ranks_here, need / 0x1p30, bench.verify ? ", and the fp64 reference sum" : "", usable / 0x1p30,
        ranks_here > 1 ? " or fewer --nproc" : ""));
  }
  torch::set_num_threads(o.threads);
  // Note "allocator": the exchanges run in the heap training gives them. Without it every large buffer
  // was faulted in afresh at each exchange, which the rows counted as codec work (64 MB in fp32 between
  // 2 ranks: 1.08 s of it, 0.52 s with the heap kept).
  keep_freed_memory_in_heap();

  // The local backend's ranks are --nproc threads, whatever WORLD_SIZE a launcher around loco set (before: its
  // link was checked against the launcher's rank count).
  const auto environment = o.backend == "local" ? std::nullopt : comm::rank_environment_from_env();
  const int world_size = environment ? environment->world_size : o.nproc;
  check_emulated_link("--bandwidth-mbps", o.bandwidth_mbps, "--latency-ms", o.latency_ms, world_size);  // as train's
  comm::GroupOptions group_options;
  group_options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000));
  group_options.link = comm::LinkModel::parse(o.bandwidth_mbps, o.latency_ms, world_size);
  group_options.delay = comm::parse_link_delay(o.delay, "--delay");
  group_options.round_size = comm::RoundSize::parse(o.round_kib, "--round-kib");

  if (o.backend == "local") {
    std::vector<nlohmann::ordered_json> rows;
    comm::run_local_replicas(
        o.nproc,
        [&](comm::Group& group) {
          auto result = run_all_reduce_bench(group, bench);
          if (group.rank() == 0) rows = std::move(result);
        },
        group_options);
    print_rows(rows);
    return;
  }
  if (o.backend != "gloo" && o.backend != "nccl") {
    throw ConfigError(fmt::format("--backend '{}' is not one of local, gloo, nccl.", o.backend));
  }
  if (!environment) {
    // Not a rank yet: start nproc ranks of this same command; rank 0's rows are the output.
    launch::LaunchOptions launch_options;
    launch_options.nproc = o.nproc;
    launch_options.master_port = 0;
    launch_options.program = "/proc/self/exe";
    launch_options.argv = original_args;
    launch_options.prefix_output = false;
    if (int status = launch::launch(launch_options); status != 0) throw CLI::RuntimeError(status);
    return;
  }
  auto group = comm::connect_from_environment(*environment, o.backend, group_options, group_options.timeout);
  auto rows = run_all_reduce_bench(*group, bench);
  if (group->rank() == 0) print_rows(rows);
}

}  // namespace

void add_bench_command(CLI::App& app, int argc, char** argv) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks of loco's parts (docs/comm.md)");
  bench->require_subcommand(1);
  auto options = std::make_shared<BenchAllReduceOptions>();
  auto& o = *options;
  CLI::App* cmd = bench->add_subcommand(
      "allreduce", "Time all-reduce per size and codec against the ring lower bound; verify against fp64");
  set_example(bench, "loco bench allreduce --backend local --nproc 4 --codec fp32,fp4");
  set_example(cmd, "loco bench allreduce --backend local --nproc 4 --codec fp32,fp4");
  cmd->add_option("--backend", o.backend, "local (ranks as threads), gloo or nccl (ranks as processes)")
      ->capture_default_str();
  cmd->add_option("--nproc", o.nproc, "Ranks (ignored when started as one rank by a launcher)")->capture_default_str();
  cmd->add_option("--sizes", o.sizes, "Message sizes per rank, e.g. 1MB,4MB,64MiB")->capture_default_str();
  cmd->add_option("--codec", o.codecs, "Codecs, comma-separated: fp32,bf16,int8,fp4,int4")->capture_default_str();
  cmd->add_option("--block-size", o.block_size, "Values per scale for int8, fp4 and int4")->capture_default_str();
  cmd->add_option("--round-kib", o.round_kib,
                  "Pacing: KiB per peer and round, off (one round; fp32 takes the backend's ring) or auto "
                  "(from --bandwidth-mbps/--latency-ms; without a bandwidth, from the link Gloo/NCCL exchanges measure, "
                  "one round until then), as comm.round_kib")
      ->capture_default_str();
  cmd->add_option("--bandwidth-mbps", o.bandwidth_mbps,
                  "Link bandwidth in Mbit/s for bound_s and emulated_s; one value or one per rank");
  cmd->add_option("--latency-ms", o.latency_ms, "Link latency in ms; one value or one per rank");
  cmd->add_option("--delay", o.delay,
                  "Show the emulated link in real time: none, latency (add rounds x latency), full (all of it)")
      ->capture_default_str();
  cmd->add_option("--repeats", o.repeats, "Timed repetitions per size and codec (the median is reported)")
      ->capture_default_str();
  cmd->add_option("--warmup", o.warmup, "Untimed repetitions first")->capture_default_str();
  cmd->add_flag("--no-verify", o.no_verify, "Skip the check against the fp64 reference");
  cmd->add_option("--timeout-s", o.timeout_s, "Timeout of each operation and of rendezvous")->capture_default_str();
  cmd->add_option("--threads", o.threads, "Intra-op threads per rank")->capture_default_str();
  const std::vector<std::string> original_args(argv, argv + argc);
  cmd->callback([options, original_args, cmd] {
    options->block_size_given = cmd->count("--block-size") > 0;
    run_bench(*options, original_args);
  });
}

}  // namespace loco::cli
