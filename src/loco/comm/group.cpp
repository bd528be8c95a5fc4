#include "loco/comm/group.h"

#include <fmt/format.h>

#include <numeric>
#include <thread>

#include "loco/util/error.h"
#include "loco/util/fs.h"
#include "loco/util/seconds_since.h"

namespace loco::comm {

namespace {

using Clock = std::chrono::steady_clock;

Clock::duration as_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::uint64_t byte_size(const torch::Tensor& tensor) {
  return static_cast<std::uint64_t>(tensor.numel()) * tensor.element_size();
}

std::vector<std::uint64_t> split_bytes(const std::vector<std::int64_t>& splits, const torch::Tensor& tensor) {
  std::vector<std::uint64_t> bytes;
  for (auto count : splits) bytes.push_back(static_cast<std::uint64_t>(count) * tensor.element_size());
  return bytes;
}

// Adds accounting, the emulated delay and a finishing step (mean, reduce-scatter's sum) to a
// backend's handle. The finishing step runs once, in the thread that waits.
class AccountedWork final : public Work {
 public:
  struct Charge {
    Traffic traffic;
    double emulated_s = 0;
    double latency_s = 0;  // the latency part of emulated_s
    LinkDelay delay = LinkDelay::none;
    Clock::time_point link_done;  // LinkDelay::full: when the link has carried this operation
    std::function<int()> stopping;  // GroupOptions::stopping
  };

  AccountedWork(WorkHandle inner, Charge charge, std::function<void()> finish,
                std::function<void(double blocked_s)> record_blocked)
      : inner_(std::move(inner)),
        charge_(charge),
        finish_(std::move(finish)),
        record_blocked_(std::move(record_blocked)),
        started_(Clock::now()) {}

  void wait() override {
    std::lock_guard lock(mutex_);
    if (error_) std::rethrow_exception(error_);
    if (done_) return;
    const auto entered = Clock::now();
    try {
      const bool was_complete = inner_->is_completed();
      inner_->wait();
      if (finish_) finish_();
      delay(inner_->completed_at().value_or(was_complete ? started_ : Clock::now()));
    } catch (...) {
      error_ = std::current_exception();
    }
    record_blocked_(seconds_since(entered));
    done_ = true;
    if (error_) std::rethrow_exception(error_);
  }

  bool is_completed() override {
    std::lock_guard lock(mutex_);
    return done_ || inner_->is_completed();
  }

 private:
  // Note "latency-injection" (group.h). `completed` is when the backend finished the transfer; where it
  // cannot tell, when wait() saw it finish, and a transfer already finished when wait() was called is
  // taken to have finished at once.
  void delay(Clock::time_point completed) const {
    if (charge_.delay == LinkDelay::none) return;
    const auto until =
        charge_.delay == LinkDelay::latency ? completed + as_duration(charge_.latency_s) : charge_.link_done;
    if (!charge_.stopping) return std::this_thread::sleep_until(until);
    while (Clock::now() < until && charge_.stopping() == 0) {
      std::this_thread::sleep_until(std::min(until, Clock::now() + std::chrono::milliseconds(100)));
    }
  }

  WorkHandle inner_;
  Charge charge_;
  std::function<void()> finish_;
  std::function<void(double)> record_blocked_;
  Clock::time_point started_;
  std::mutex mutex_;
  bool done_ = false;
  std::exception_ptr error_;
};

// Runs a local step once after another operation has completed (reduce-scatter's sum).
class FinishingWork final : public Work {
 public:
  FinishingWork(WorkHandle inner, std::function<void()> finish)
      : inner_(std::move(inner)), finish_(std::move(finish)) {}

  void wait() override {
    std::lock_guard lock(mutex_);
    inner_->wait();
    if (finish_) {
      finish_();
      finish_ = nullptr;
    }
  }
  bool is_completed() override { return inner_->is_completed(); }

 private:
  WorkHandle inner_;
  std::function<void()> finish_;
  std::mutex mutex_;
};

class CompletedWork final : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};

}  // namespace

LinkDelay parse_link_delay(const std::string& text, const std::string& key) {
  if (text == "none") return LinkDelay::none;
  if (text == "latency") return LinkDelay::latency;
  if (text == "full") return LinkDelay::full;
  throw ConfigError(fmt::format("{} '{}' is not one of none, latency, full.", key, text));
}

WorkHandle completed_work() { return std::make_shared<CompletedWork>(); }

namespace {
thread_local bool waits_in_background = false;
}  // namespace

BackgroundWaits::BackgroundWaits() : outer_(waits_in_background) { waits_in_background = true; }
BackgroundWaits::~BackgroundWaits() { waits_in_background = outer_; }
bool BackgroundWaits::on_this_thread() { return waits_in_background; }

std::vector<std::int64_t> even_split(std::int64_t count, int parts) {
  LOCO_CHECK(parts > 0 && count >= 0, "cannot split {} elements into {} parts", count, parts);
  std::vector<std::int64_t> splits(static_cast<std::size_t>(parts), count / parts);
  for (std::int64_t i = 0; i < count % parts; ++i) ++splits[static_cast<std::size_t>(i)];
  return splits;
}

Group::Group(int rank, int size, GroupOptions options) : rank_(rank), size_(size), options_(std::move(options)) {
  LOCO_CHECK(size >= 1 && rank >= 0 && rank < size, "rank {} of a group of {}", rank, size);
}

CommStats Group::stats() const {
  std::lock_guard lock(stats_->mutex);
  return stats_->stats;
}

Timeout Group::resolve(Timeout timeout) const { return timeout == kGroupTimeout ? options_.timeout : timeout; }

void Group::check_tensor(const torch::Tensor& tensor, const char* what) const {
  LOCO_CHECK(tensor.defined(), "{}: undefined tensor", what);
  LOCO_CHECK(tensor.is_contiguous(), "{}: tensor must be contiguous", what);
  LOCO_CHECK(tensor.device() == device(), "{}: tensor on {}, group {} works on {}", what, tensor.device().str(),
             backend(), device().str());
}

void Group::check_rank(int rank, const char* what) const {
  LOCO_CHECK(rank >= 0 && rank < size_, "{}: rank {} outside a group of {}", what, rank, size_);
}

WorkHandle Group::accounted(WorkHandle work, const Traffic& traffic, double emulated_s, double latency_s,
                            std::function<void()> finish) {
  AccountedWork::Charge charge{traffic, emulated_s, latency_s, options_.delay, {}, options_.stopping};
  {
    std::lock_guard lock(stats_->mutex);
    stats_->stats.bytes_sent += traffic.bytes_sent;
    stats_->stats.bytes_recv += traffic.bytes_recv;
    stats_->stats.operations += 1;
    stats_->stats.emulated_s += emulated_s;
    // The link carries one operation's bytes after another: one started while another is in flight (DDP's
    // buckets, the rounds of a paced exchange) sends once that one's bytes are out, while its latency
    // passes, as on a real link.
    const auto start = std::max(Clock::now(), stats_->link_free);
    charge.link_done = start + as_duration(emulated_s);
    stats_->link_free = start + as_duration(std::max(emulated_s - latency_s, 0.0));
  }
  auto stats = stats_;
  return std::make_shared<AccountedWork>(std::move(work), charge, std::move(finish), [stats](double blocked_s) {
    // Called on the thread that waited.
    const bool background = BackgroundWaits::on_this_thread();
    std::lock_guard lock(stats->mutex);
    (background ? stats->stats.background_s : stats->stats.blocked_s) += blocked_s;
  });
}

void Group::record_blocked(double seconds) {
  std::lock_guard lock(stats_->mutex);
  stats_->stats.blocked_s += seconds;
}

WorkHandle Group::collective_charged(WorkHandle work, const Traffic& traffic, std::function<void()> finish) {
  return accounted(std::move(work), traffic, options_.link.collective_seconds(traffic),
                   traffic.rounds * options_.link.highest_latency_s(), std::move(finish));
}

WorkHandle Group::message_charged(WorkHandle work, const Traffic& traffic, int peer) {
  const Traffic latency_only{0, 0, traffic.rounds};
  return accounted(std::move(work), traffic, options_.link.message_seconds(rank_, peer, traffic),
                   options_.link.message_seconds(rank_, peer, latency_only), {});
}

WorkHandle Group::all_reduce_async(const torch::Tensor& tensor, ReduceOp op, Timeout timeout) {
  check_tensor(tensor, "all_reduce");
  const Traffic traffic = ring_all_reduce_traffic(byte_size(tensor), size_);
  std::function<void()> finish;
  if (op == ReduceOp::mean) finish = [tensor, size = size_] { tensor.div_(size); };
  return collective_charged(start_all_reduce_sum(tensor, resolve(timeout)), traffic, std::move(finish));
}

WorkHandle Group::all_gather_async(const torch::Tensor& input, const torch::Tensor& output, Timeout timeout) {
  check_tensor(input, "all_gather input");
  check_tensor(output, "all_gather output");
  LOCO_CHECK(output.numel() == input.numel() * size_ && output.scalar_type() == input.scalar_type(),
             "all_gather: output has {} elements of {}, needs {} of {}", output.numel(),
             c10::toString(output.scalar_type()), input.numel() * size_, c10::toString(input.scalar_type()));
  const Traffic traffic = ring_all_gather_traffic(byte_size(input), size_);
  return collective_charged(start_all_gather(input, output, resolve(timeout)), traffic);
}

WorkHandle Group::all_to_all_async(const torch::Tensor& input, const torch::Tensor& output,
                                   std::vector<std::int64_t> input_splits, std::vector<std::int64_t> output_splits,
                                   Timeout timeout) {
  check_tensor(input, "all_to_all input");
  check_tensor(output, "all_to_all output");
  auto total = [](const std::vector<std::int64_t>& splits) {
    return std::accumulate(splits.begin(), splits.end(), std::int64_t{0});
  };
  LOCO_CHECK(static_cast<int>(input_splits.size()) == size_ && static_cast<int>(output_splits.size()) == size_,
             "all_to_all: {} input and {} output splits for a group of {}", input_splits.size(), output_splits.size(),
             size_);
  LOCO_CHECK(total(input_splits) == input.numel() && total(output_splits) == output.numel(),
             "all_to_all: splits add up to {} and {}, tensors have {} and {} elements", total(input_splits),
             total(output_splits), input.numel(), output.numel());
  LOCO_CHECK(input.scalar_type() == output.scalar_type(), "all_to_all: input and output types differ");
  const Traffic traffic =
      all_to_all_traffic(split_bytes(input_splits, input), split_bytes(output_splits, output), rank_);
  return collective_charged(start_all_to_all(input, output, input_splits, output_splits, resolve(timeout)), traffic);
}

WorkHandle Group::reduce_scatter_async(const torch::Tensor& input, const torch::Tensor& output, ReduceOp op,
                                       Timeout timeout) {
  check_tensor(input, "reduce_scatter input");
  check_tensor(output, "reduce_scatter output");
  LOCO_CHECK(output.scalar_type() == input.scalar_type(), "reduce_scatter: output is {}, input {}",
             c10::toString(output.scalar_type()), c10::toString(input.scalar_type()));
  const auto pieces = even_split(input.numel(), size_);
  const std::int64_t mine = pieces[static_cast<std::size_t>(rank_)];
  LOCO_CHECK(output.numel() == mine, "reduce_scatter: output has {} elements, rank {}'s piece has {}", output.numel(),
             rank_, mine);
  // Every rank sends piece r to rank r, then sums what it received in rank order.
  auto received = torch::empty({mine * size_}, input.options());
  auto work = all_to_all_async(input.reshape(-1), received, pieces,
                               std::vector<std::int64_t>(static_cast<std::size_t>(size_), mine), timeout);
  auto flat_output = output.view({-1});
  const int size = size_;
  auto finish = [received, flat_output, mine, size, op] {
    auto sum = received.narrow(0, 0, mine).clone();
    for (int source = 1; source < size; ++source) sum.add_(received.narrow(0, source * mine, mine));
    if (op == ReduceOp::mean) sum.div_(size);
    flat_output.copy_(sum);
  };
  // The bytes were charged by all_to_all_async; this wrapper only adds the local sum.
  return std::make_shared<FinishingWork>(std::move(work), std::move(finish));
}

WorkHandle Group::broadcast_async(const torch::Tensor& tensor, int root, Timeout timeout) {
  check_tensor(tensor, "broadcast");
  check_rank(root, "broadcast root");
  const Traffic traffic = binomial_broadcast_traffic(byte_size(tensor), rank_, root, size_);
  return collective_charged(start_broadcast(tensor, root, resolve(timeout)), traffic);
}

WorkHandle Group::send_async(const torch::Tensor& tensor, int destination, int tag, Timeout timeout) {
  check_tensor(tensor, "send");
  check_rank(destination, "send destination");
  LOCO_CHECK(destination != rank_, "send: rank {} sends to itself", rank_);
  const Traffic traffic = point_to_point_traffic(byte_size(tensor), 0);
  return message_charged(start_send(tensor, destination, tag, resolve(timeout)), traffic, destination);
}

WorkHandle Group::recv_async(const torch::Tensor& tensor, int source, int tag, Timeout timeout) {
  check_tensor(tensor, "recv");
  check_rank(source, "recv source");
  LOCO_CHECK(source != rank_, "recv: rank {} receives from itself", rank_);
  const Traffic traffic = point_to_point_traffic(0, byte_size(tensor));
  return message_charged(start_recv(tensor, source, tag, resolve(timeout)), traffic, source);
}

WorkHandle Group::barrier_async(Timeout timeout) {
  const Traffic traffic = barrier_traffic(size_);
  return collective_charged(start_barrier(resolve(timeout)), traffic);
}

void Group::all_reduce(const torch::Tensor& tensor, ReduceOp op, Timeout timeout) {
  all_reduce_async(tensor, op, timeout)->wait();
}
std::int64_t Group::round_bytes_per_peer(int peers) const {
  return comm::round_bytes_per_peer(options_.round_size, options_.link, peers, measured_link_.estimate());
}

int Group::rounds_in_flight(int peers) const {
  return comm::rounds_in_flight(options_.round_size, options_.link, peers, measured_link_.estimate());
}

Pacing Group::pacing(int peers) {
  Pacing p;
  p.peers = peers;
  p.round_bytes = round_bytes_per_peer(peers);
  p.in_flight = rounds_in_flight(peers);
  if (const auto link = link_for_rounds(options_.link, measured_link_.estimate())) {
    p.from = options_.link.slowest_bandwidth_bps() > 0 ? Pacing::From::configured : Pacing::From::measured;
    p.link = *link;
  }
  std::lock_guard lock(pacing_mutex_);
  last_pacing_ = p;
  return p;
}

std::optional<Pacing> Group::last_pacing() const {
  std::lock_guard lock(pacing_mutex_);
  return last_pacing_;
}

std::string Pacing::describe() const {
  const std::string rounds =
      round_bytes > 0 ? fmt::format("rounds of {:.4g} KiB per peer", static_cast<double>(round_bytes) / 1024)
                      : std::string("one round");
  const std::string source =
      from == From::nothing
          ? std::string("no link known")
          : fmt::format("link {:.4g} Mbit/s, {:.3g} ms, {}", link.bandwidth_bps / 1e6, link.latency_s * 1e3,
                        from == From::configured ? "configured" : "measured");
  return fmt::format("{} among {} ranks, {} in flight ({})", rounds, peers, in_flight, source);
}

bool Group::measures_link() const {
  return options_.round_size.mode == RoundSize::Mode::automatic && !(options_.link.slowest_bandwidth_bps() > 0) &&
         size_ > 1 && backend() != "local";
}

void Group::learn_link(const std::vector<LinkSample>& samples, Timeout timeout) {
  if (samples.empty()) return;
  const auto n = static_cast<std::int64_t>(samples.size());
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  auto mine = torch::empty({n, 3}, options);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& s = samples[static_cast<std::size_t>(i)];
    mine[i][0] = s.bytes;
    mine[i][1] = s.rounds;
    mine[i][2] = s.seconds;
  }
  const torch::Tensor all = torch::empty({size_ * n * 3}, options.device(device()));
  start_all_gather(mine.view({-1}).to(device()), all, resolve(timeout))->wait();
  // The most bytes any rank sent in the phase, in the time of the rank that waited least: the last to
  // arrive, whose time holds no wait for replicas that were behind.
  const torch::Tensor gathered = all.cpu().view({size_, n, 3});
  const torch::Tensor most = gathered.amax(0), least = gathered.amin(0);
  for (std::int64_t i = 0; i < n; ++i) {
    measured_link_.add({most[i][0].item<double>(), most[i][1].item<double>(), least[i][2].item<double>()});
  }
}

// Every rank's `value`, in rank order, outside stats() and the emulated link.
torch::Tensor Group::values_of_ranks(std::int64_t value, Timeout timeout) {
  const auto options = torch::TensorOptions().dtype(torch::kInt64).device(device());
  const torch::Tensor mine = torch::full({1}, value, options);
  const torch::Tensor all = torch::empty({size_}, options);
  start_all_gather(mine, all, resolve(timeout))->wait();
  return all.cpu();
}

std::int64_t Group::smallest_of_ranks(std::int64_t value, Timeout timeout) {
  return values_of_ranks(value, timeout).min().item<std::int64_t>();
}

std::vector<int> Group::ranks_differing_from_rank_0(std::int64_t value, Timeout timeout) {
  const torch::Tensor values = values_of_ranks(value, timeout);
  std::vector<int> differing;
  for (int r = 1; r < size_; ++r) {
    if (values[r].item<std::int64_t>() != values[0].item<std::int64_t>()) differing.push_back(r);
  }
  return differing;
}

std::vector<int> Group::ranks_differing_from_rank_0(std::string_view text, Timeout timeout) {
  return ranks_differing_from_rank_0(static_cast<std::int64_t>(std::stoull(crc32_hex(text), nullptr, 16)), timeout);
}

void Group::all_gather(const torch::Tensor& input, const torch::Tensor& output, Timeout timeout) {
  all_gather_async(input, output, timeout)->wait();
}
void Group::reduce_scatter(const torch::Tensor& input, const torch::Tensor& output, ReduceOp op, Timeout timeout) {
  reduce_scatter_async(input, output, op, timeout)->wait();
}
void Group::all_to_all(const torch::Tensor& input, const torch::Tensor& output, std::vector<std::int64_t> input_splits,
                       std::vector<std::int64_t> output_splits, Timeout timeout) {
  all_to_all_async(input, output, std::move(input_splits), std::move(output_splits), timeout)->wait();
}
void Group::broadcast(const torch::Tensor& tensor, int root, Timeout timeout) {
  broadcast_async(tensor, root, timeout)->wait();
}
void Group::send(const torch::Tensor& tensor, int destination, int tag, Timeout timeout) {
  send_async(tensor, destination, tag, timeout)->wait();
}
void Group::recv(const torch::Tensor& tensor, int source, int tag, Timeout timeout) {
  recv_async(tensor, source, tag, timeout)->wait();
}
void Group::barrier(Timeout timeout) { barrier_async(timeout)->wait(); }

}  // namespace loco::comm
