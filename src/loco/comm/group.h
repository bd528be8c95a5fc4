// The communication interface every strategy talks to (docs/design.md §3 "Group"): collectives and
// point-to-point messages between the replicas of one run, with a timeout on every call, typed errors
// (comm_error.h), and per-rank accounting of bytes, blocked time and emulated link time.
//
// Every operation starts asynchronously and returns a Work handle; the blocking forms are the
// asynchronous ones followed by wait(). A tensor handed to an operation must not be touched until
// its handle has been waited on. Operations are matched across ranks by the order in which each rank
// starts them, as in c10d: every rank must start the same collectives in the same order.
//
// Backends (LocalGroup: replicas in one process; C10dGroup: Gloo/NCCL across processes) implement
// seven primitives. Reduce-scatter and the mean are built here from them, once for both backends,
// so that both give the same result for the same call (Gloo in libtorch 1.13 has no reduce-scatter).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loco/comm/comm_stats.h"
#include "loco/comm/link/link_fit.h"
#include "loco/comm/link/link_model.h"
#include "loco/comm/link/round_size.h"

namespace loco::comm {

enum class ReduceOp { sum, mean };

// How the emulated link shows in real time (note "latency-injection"): `none` only accounts for it;
// `latency` delays each operation's completion by its rounds × the link latency, counted from when the
// backend finished it (for links shaped by tc, where the kernel has no netem to add latency); `full`
// delays completion until the link model's whole time has passed (bandwidth too), with the bytes of one
// rank's operations carried one after another (an operation started while another is in flight sends
// after that one's bytes, while that one's latency passes, as on a real link).
enum class LinkDelay { none, latency, full };

// "none", "latency" or "full"; ConfigError naming `key` (the option or config key) otherwise.
LinkDelay parse_link_delay(const std::string& text, const std::string& key);

using Timeout = std::chrono::milliseconds;
// Use the group's default timeout (GroupOptions::timeout).
inline constexpr Timeout kGroupTimeout{-1};

struct GroupOptions {
  Timeout timeout{std::chrono::minutes(10)};
  LinkModel link;
  LinkDelay delay = LinkDelay::none;
  // Rounds of the exchanges built on piecewise_reduce.h (note "paced-exchange"). Every rank of a group
  // must have the same: the rounds are collectives, matched by order.
  RoundSize round_size;
  // Polled while a collective of a C10dGroup is waited for (not send/recv: Gloo reports their completion
  // only in wait()) and while the group's ranks meet (c10d_rendezvous.h await_every_rank); when it says
  // true the wait gives up with PeerLost and the group must be abandoned.
  // Elastic runs pass "the coordinator says the quorum broke" (elastic/quorum_group.h), so that nobody
  // waits for a collective timeout after a member stopped.
  std::function<bool()> abandoned;
  // The signal of a stop asked for (0: none; note "graceful-stop": training passes its own). Polled (every
  // 100 ms) while an emulated link's time is waited out in real time (LinkDelay latency or full): the wait then
  // ends at once. The transfer is complete by then, so every result is the same, and the emulated clock
  // (CommStats::emulated_s) still counts the link's whole time (at 1 kbit/s a DiLoCo exchange of a tiny model
  // waited ~9000 s before SIGTERM could take effect). Polled too while a C10dGroup's ranks meet (the store's
  // connection and c10d_rendezvous.h await_every_rank): the rendezvous then ends with StopRequested (before: a
  // rank waiting for one that never came ignored SIGTERM until comm.timeout_s).
  std::function<int()> stopping;
};

// While one is alive, this thread's waits are not the training's: it runs exchanges in the background
// while training goes on (Streaming DiLoCo's overlapped exchanges). Its wait() time counts in
// CommStats::background_s instead of blocked_s, and the training thread adds what it then waits for the
// background's results itself (Group::record_blocked). Without this, blocked_s (`comm_s` in
// metrics.jsonl) counted the whole of every overlapped exchange as time training waited.
class BackgroundWaits {
 public:
  BackgroundWaits();
  ~BackgroundWaits();
  BackgroundWaits(const BackgroundWaits&) = delete;
  BackgroundWaits& operator=(const BackgroundWaits&) = delete;
  static bool on_this_thread();

 private:
  bool outer_;
};

// How a paced exchange among `peers` ranks is cut (note "paced-exchange", link/round_size.h), and from
// what: for metrics.jsonl and the log, so that a user sees what comm.round_kib = auto chose.
struct Pacing {
  int peers = 0;
  std::int64_t round_bytes = 0;  // per peer and round; 0: one round
  int in_flight = 1;             // rounds started before the first is waited for
  enum class From { nothing, configured, measured } from = From::nothing;  // the link that sized them
  LinkSpec link;                 // that link (from != nothing)

  // "rounds of 32 KiB per peer among 2 ranks, 1 in flight (link 94.1 Mbit/s, 3.2 ms, measured)".
  std::string describe() const;
};

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation has completed; throws CommTimeout, PeerLost or CommError.
  // Calling it again returns at once (or throws the same error again).
  virtual void wait() = 0;
  // Whether wait() would return at once. Gloo's send and recv report completion only from wait():
  // poll collectives, not messages.
  virtual bool is_completed() = 0;
  // When the backend finished the transfer, where it can tell (LocalGroup's collectives, Gloo's): an
  // operation waited for after later ones were started may have finished long before its wait()
  // (note "latency-injection").
  virtual std::optional<std::chrono::steady_clock::time_point> completed_at() const { return std::nullopt; }
};
using WorkHandle = std::shared_ptr<Work>;

// A handle on an operation that finished when it started (a buffered send, an empty collective).
WorkHandle completed_work();

// Element counts of `parts` nearly equal pieces of `count` (the first count % parts get one more).
std::vector<std::int64_t> even_split(std::int64_t count, int parts);

class Group {
 public:
  virtual ~Group() = default;
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend() const = 0;
  // Where tensors handed to this group must live.
  virtual torch::Device device() const { return torch::kCPU; }
  const GroupOptions& options() const { return options_; }
  CommStats stats() const;
  // Adds to blocked_s a wait of the training that is not a wait() of this group's: for the results of
  // exchanges it runs in the background (BackgroundWaits).
  void record_blocked(double seconds);

  // In place: every rank ends with the sum (or mean) of all ranks' tensors.
  WorkHandle all_reduce_async(const torch::Tensor& tensor, ReduceOp op = ReduceOp::sum,
                              Timeout timeout = kGroupTimeout);
  // output (size·input.numel() elements) receives every rank's input in rank order.
  WorkHandle all_gather_async(const torch::Tensor& input, const torch::Tensor& output, Timeout timeout = kGroupTimeout);
  // input is split into size pieces by even_split; output (this rank's piece) receives their sum/mean.
  WorkHandle reduce_scatter_async(const torch::Tensor& input, const torch::Tensor& output, ReduceOp op = ReduceOp::sum,
                                  Timeout timeout = kGroupTimeout);
  // Piece r of input (input_splits[r] elements) goes to rank r; piece r of output comes from rank r.
  WorkHandle all_to_all_async(const torch::Tensor& input, const torch::Tensor& output,
                              std::vector<std::int64_t> input_splits, std::vector<std::int64_t> output_splits,
                              Timeout timeout = kGroupTimeout);
  WorkHandle broadcast_async(const torch::Tensor& tensor, int root, Timeout timeout = kGroupTimeout);
  WorkHandle send_async(const torch::Tensor& tensor, int destination, int tag = 0, Timeout timeout = kGroupTimeout);
  WorkHandle recv_async(const torch::Tensor& tensor, int source, int tag = 0, Timeout timeout = kGroupTimeout);
  WorkHandle barrier_async(Timeout timeout = kGroupTimeout);

  void all_reduce(const torch::Tensor& tensor, ReduceOp op = ReduceOp::sum, Timeout timeout = kGroupTimeout);
  void all_gather(const torch::Tensor& input, const torch::Tensor& output, Timeout timeout = kGroupTimeout);
  void reduce_scatter(const torch::Tensor& input, const torch::Tensor& output, ReduceOp op = ReduceOp::sum,
                      Timeout timeout = kGroupTimeout);
  void all_to_all(const torch::Tensor& input, const torch::Tensor& output, std::vector<std::int64_t> input_splits,
                  std::vector<std::int64_t> output_splits, Timeout timeout = kGroupTimeout);
  void broadcast(const torch::Tensor& tensor, int root, Timeout timeout = kGroupTimeout);
  void send(const torch::Tensor& tensor, int destination, int tag = 0, Timeout timeout = kGroupTimeout);
  void recv(const torch::Tensor& tensor, int source, int tag = 0, Timeout timeout = kGroupTimeout);
  void barrier(Timeout timeout = kGroupTimeout);

  // Bytes per peer and round of this group's paced exchanges among `peers` of its ranks (note
  // "paced-exchange", link/round_size.h): from the configured link, or from the measured one.
  std::int64_t round_bytes_per_peer(int peers) const;
  // How many of those rounds an exchange keeps in flight (link/round_size.h, "Rounds in flight").
  int rounds_in_flight(int peers) const;
  // Both, and the link they come from, for an exchange about to run; remembered as last_pacing().
  Pacing pacing(int peers);
  // The pacing of the last paced exchange (nullopt before the first).
  std::optional<Pacing> last_pacing() const;
  // Note "measured-link" (link/link_fit.h): whether this group learns its link from its exchanges
  // (comm.round_kib = auto without a configured bandwidth, ranks in different processes), and what it
  // learnt so far. Every rank holds the same.
  bool measures_link() const;
  const LinkFit& measured_link() const { return measured_link_; }
  // After an exchange, every rank with its own samples of it (the same count on every rank): each
  // joins the fit with the most bytes any rank sent and the seconds of the rank that waited least (the
  // last to arrive). One all-gather, left out of stats() like the set-up checks below.
  void learn_link(const std::vector<LinkSample>& samples, Timeout timeout = kGroupTimeout);

  // The ranks whose `value` differs from rank 0's, in order (empty: all agree), for the checks at
  // set-up of what every rank must share (the tokenizer of its data). Every rank gets the same answer.
  // One int64 per rank, left out of stats() and of the emulated link: it is not training traffic.
  std::vector<int> ranks_differing_from_rank_0(std::int64_t value, Timeout timeout = kGroupTimeout);
  // The same for a text (a setting, a hash, a state), compared by its CRC-32.
  std::vector<int> ranks_differing_from_rank_0(std::string_view text, Timeout timeout = kGroupTimeout);
  // The smallest of every rank's `value` (the latest checkpoint step all hold, on a resume); the same terms.
  std::int64_t smallest_of_ranks(std::int64_t value, Timeout timeout = kGroupTimeout);

 protected:
  Group(int rank, int size, GroupOptions options);

  // The backend's primitives. Arguments are validated before these are called; tensors are
  // contiguous and on device(); all_reduce sums; splits are in elements of flat tensors.
  virtual WorkHandle start_all_reduce_sum(const torch::Tensor& tensor, Timeout timeout) = 0;
  virtual WorkHandle start_all_gather(const torch::Tensor& input, const torch::Tensor& output, Timeout timeout) = 0;
  virtual WorkHandle start_all_to_all(const torch::Tensor& input, const torch::Tensor& output,
                                      const std::vector<std::int64_t>& input_splits,
                                      const std::vector<std::int64_t>& output_splits, Timeout timeout) = 0;
  virtual WorkHandle start_broadcast(const torch::Tensor& tensor, int root, Timeout timeout) = 0;
  virtual WorkHandle start_send(const torch::Tensor& tensor, int destination, int tag, Timeout timeout) = 0;
  virtual WorkHandle start_recv(const torch::Tensor& tensor, int source, int tag, Timeout timeout) = 0;
  virtual WorkHandle start_barrier(Timeout timeout) = 0;

 private:
  torch::Tensor values_of_ranks(std::int64_t value, Timeout timeout);  // every rank's, in rank order

  struct StatsCell {
    std::mutex mutex;
    CommStats stats;
    std::chrono::steady_clock::time_point link_free;  // when the emulated link has carried everything so far
  };

  Timeout resolve(Timeout timeout) const;
  // Counts the operation's traffic and wraps its handle (note "traffic-model"): a collective is charged
  // on the slowest link, a message on the worse of the two ranks' links.
  WorkHandle accounted(WorkHandle work, const Traffic& traffic, double emulated_s, double latency_s,
                       std::function<void()> finish);
  WorkHandle collective_charged(WorkHandle work, const Traffic& traffic, std::function<void()> finish = {});
  WorkHandle message_charged(WorkHandle work, const Traffic& traffic, int peer);
  void check_tensor(const torch::Tensor& tensor, const char* what) const;
  void check_rank(int rank, const char* what) const;

  int rank_;
  int size_;
  GroupOptions options_;
  LinkFit measured_link_;  // the group's exchanges run one at a time, so it needs no lock
  mutable std::mutex pacing_mutex_;  // last_pacing() is read by the training thread while exchanges run
  std::optional<Pacing> last_pacing_;
  std::shared_ptr<StatsCell> stats_ = std::make_shared<StatsCell>();
};

}  // namespace loco::comm
