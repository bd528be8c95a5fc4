#include "loco/comm/local/local_group.h"

#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "loco/comm/local/local_world.h"
#include "loco/util/error.h"
#include "loco/util/run_on_threads.h"

namespace loco::comm {

namespace {

using Clock = LocalWorld::Clock;

// A collective run by the rank's worker thread; wait() takes its result (or its exception).
class FutureWork final : public Work {
 public:
  // `finished_at` is set by the worker before it completes `future`.
  FutureWork(std::shared_future<void> future, std::shared_ptr<const Clock::time_point> finished_at)
      : future_(std::move(future)), finished_at_(std::move(finished_at)) {}
  void wait() override { future_.get(); }
  bool is_completed() override { return future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }
  std::optional<Clock::time_point> completed_at() const override {
    if (future_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return std::nullopt;
    return *finished_at_;
  }

 private:
  std::shared_future<void> future_;
  std::shared_ptr<const Clock::time_point> finished_at_;
};

// A receive takes its message when waited on; its ticket was reserved when it was started, so
// receives on one channel get the messages in the order they were started.
class ReceiveWork final : public Work {
 public:
  ReceiveWork(std::shared_ptr<LocalWorld> world, torch::Tensor tensor, int source, int destination, int tag,
              std::uint64_t ticket, Timeout timeout)
      : world_(std::move(world)),
        tensor_(std::move(tensor)),
        source_(source),
        destination_(destination),
        tag_(tag),
        ticket_(ticket),
        deadline_(Clock::now() + timeout) {}

  void wait() override {
    if (done_) return;
    auto message = world_->take(source_, destination_, tag_, ticket_, deadline_);
    LOCO_CHECK(message.numel() == tensor_.numel() && message.scalar_type() == tensor_.scalar_type(),
               "recv: rank {} expects {} elements of {} from rank {} (tag {}), the message has {} of {}", destination_,
               tensor_.numel(), c10::toString(tensor_.scalar_type()), source_, tag_, message.numel(),
               c10::toString(message.scalar_type()));
    tensor_.view({-1}).copy_(message.view({-1}));
    done_ = true;
  }
  bool is_completed() override { return done_ || world_->has_arrived(source_, destination_, tag_, ticket_); }

 private:
  std::shared_ptr<LocalWorld> world_;
  torch::Tensor tensor_;
  int source_, destination_, tag_;
  std::uint64_t ticket_;
  Clock::time_point deadline_;
  bool done_ = false;
};

class LocalGroup final : public Group {
 public:
  LocalGroup(std::shared_ptr<LocalWorld> world, int rank, int size, GroupOptions options)
      : Group(rank, size, std::move(options)), world_(std::move(world)), worker_([this] { run_worker(); }) {}

  ~LocalGroup() override {
    world_->leave(rank());
    {
      std::lock_guard lock(queue_mutex_);
      stopping_ = true;
    }
    queue_changed_.notify_all();
    worker_.join();
  }

  std::string backend() const override { return "local"; }

 protected:
  WorkHandle start_all_reduce_sum(const torch::Tensor& tensor, Timeout timeout) override {
    return collective(fmt::format("all_reduce(n={})", tensor.numel()), {tensor.clone()}, timeout,
                      [tensor](const std::vector<LocalWorld::Contribution>& all) {
                        auto sum = all[0][0].clone();
                        for (std::size_t rank = 1; rank < all.size(); ++rank) sum.add_(all[rank][0]);
                        tensor.copy_(sum);
                      });
  }

  WorkHandle start_all_gather(const torch::Tensor& input, const torch::Tensor& output, Timeout timeout) override {
    return collective(fmt::format("all_gather(n={})", input.numel()), {input.clone()}, timeout,
                      [output](const std::vector<LocalWorld::Contribution>& all) {
                        auto flat = output.view({-1});
                        std::int64_t offset = 0;
                        for (const auto& contribution : all) {
                          const auto piece = contribution[0].view({-1});
                          flat.narrow(0, offset, piece.numel()).copy_(piece);
                          offset += piece.numel();
                        }
                      });
  }

  WorkHandle start_all_to_all(const torch::Tensor& input, const torch::Tensor& output,
                              const std::vector<std::int64_t>& input_splits,
                              const std::vector<std::int64_t>& output_splits, Timeout timeout) override {
    LocalWorld::Contribution pieces;
    std::int64_t offset = 0;
    const auto flat_input = input.view({-1});
    for (auto count : input_splits) {
      pieces.push_back(flat_input.narrow(0, offset, count).clone());
      offset += count;
    }
    const int me = rank();
    return collective("all_to_all", std::move(pieces), timeout,
                      [output, output_splits, me](const std::vector<LocalWorld::Contribution>& all) {
                        auto flat = output.view({-1});
                        std::int64_t offset = 0;
                        for (std::size_t source = 0; source < all.size(); ++source) {
                          const auto& piece = all[source][static_cast<std::size_t>(me)];
                          LOCO_CHECK(piece.numel() == output_splits[source],
                                     "all_to_all: rank {} sends {} elements to rank {}, which expects {}", source,
                                     piece.numel(), me, output_splits[source]);
                          flat.narrow(0, offset, piece.numel()).copy_(piece);
                          offset += piece.numel();
                        }
                      });
  }

  WorkHandle start_broadcast(const torch::Tensor& tensor, int root, Timeout timeout) override {
    LocalWorld::Contribution contribution;
    if (rank() == root) contribution.push_back(tensor.clone());
    const bool receives = rank() != root;
    return collective(fmt::format("broadcast(root={}, n={})", root, tensor.numel()), std::move(contribution), timeout,
                      [tensor, root, receives](const std::vector<LocalWorld::Contribution>& all) {
                        if (receives) tensor.copy_(all[static_cast<std::size_t>(root)][0]);
                      });
  }

  WorkHandle start_send(const torch::Tensor& tensor, int destination, int tag, Timeout) override {
    world_->post(rank(), destination, tag, tensor.clone());
    return completed_work();
  }

  WorkHandle start_recv(const torch::Tensor& tensor, int source, int tag, Timeout timeout) override {
    const auto ticket = world_->reserve(source, rank(), tag);
    return std::make_shared<ReceiveWork>(world_, tensor, source, rank(), tag, ticket, timeout);
  }

  WorkHandle start_barrier(Timeout timeout) override {
    return collective("barrier", {}, timeout, [](const std::vector<LocalWorld::Contribution>&) {});
  }

 private:
  using Consume = std::function<void(const std::vector<LocalWorld::Contribution>&)>;

  // Queues the rendezvous on this rank's worker thread, so that collectives run in the order they
  // were started (as c10d does) while the caller goes on. The timeout counts from when it runs.
  WorkHandle collective(std::string operation, LocalWorld::Contribution contribution, Timeout timeout,
                        Consume consume) {
    const std::uint64_t sequence = next_sequence_++;
    auto finished_at = std::make_shared<Clock::time_point>();
    std::packaged_task<void()> task([this, sequence, operation = std::move(operation),
                                     contribution = std::move(contribution), timeout, consume = std::move(consume),
                                     finished_at] {
      // Set before the future is: a waiter that sees the future ready reads it after this write.
      struct Stamp {
        Clock::time_point* at;
        ~Stamp() { *at = Clock::now(); }
      } stamp{finished_at.get()};
      consume(world_->exchange(rank(), sequence, operation, contribution, Clock::now() + timeout));
    });
    auto future = task.get_future().share();
    {
      std::lock_guard lock(queue_mutex_);
      queue_.push_back(std::move(task));
    }
    queue_changed_.notify_one();
    return std::make_shared<FutureWork>(std::move(future), std::move(finished_at));
  }

  void run_worker() {
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock lock(queue_mutex_);
        queue_changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();  // exceptions go into the task's future
    }
  }

  std::shared_ptr<LocalWorld> world_;
  std::uint64_t next_sequence_ = 0;
  std::mutex queue_mutex_;
  std::condition_variable queue_changed_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stopping_ = false;
  std::thread worker_;  // last: starts after everything it uses
};

}  // namespace

std::vector<std::unique_ptr<Group>> make_local_groups(int world_size, const GroupOptions& options) {
  LOCO_CHECK(world_size >= 1, "a local group needs at least one rank, not {}", world_size);
  auto world = std::make_shared<LocalWorld>(world_size);
  std::vector<std::unique_ptr<Group>> groups;
  for (int rank = 0; rank < world_size; ++rank) {
    try {
      groups.push_back(std::make_unique<LocalGroup>(world, rank, world_size, options));  // starts a thread
    } catch (const std::system_error& e) {
      throw threads_refused(rank + 1, world_size, "dist.replicas (× dist.stages)", e.what());
    }
  }
  return groups;
}

namespace {

// Runs body(i) for i < count, each on its own thread, and waits for all; a body that throws calls
// leave(i) at once (so that the others get PeerLost rather than wait out their timeouts), and the first
// exception is rethrown here.
void run_threads(int count, const std::function<void(int)>& body, const std::function<void(int)>& leave) {
  std::mutex mutex;
  std::exception_ptr first_error;
  run_on_threads(
      count,
      [&](int i) {
        try {
          body(i);
        } catch (...) {
          std::lock_guard lock(mutex);
          if (!first_error) first_error = std::current_exception();
          leave(i);
        }
      },
      leave, "dist.replicas (× dist.stages)");
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace

void run_local_replicas(int world_size, const std::function<void(Group&)>& body, const GroupOptions& options) {
  auto groups = make_local_groups(world_size, options);
  run_threads(
      world_size, [&](int rank) { body(*groups[static_cast<std::size_t>(rank)]); },
      [&](int rank) { groups[static_cast<std::size_t>(rank)].reset(); });
}

void run_local_pipelines(int replicas, int stages, const std::function<void(Group& pipeline, Group& stage)>& body,
                         const GroupOptions& pipeline_options, const GroupOptions& stage_options) {
  std::vector<std::vector<std::unique_ptr<Group>>> pipelines, stage_groups;
  for (int r = 0; r < replicas; ++r) pipelines.push_back(make_local_groups(stages, pipeline_options));
  for (int s = 0; s < stages; ++s) stage_groups.push_back(make_local_groups(replicas, stage_options));
  // Thread i is stage i % stages of replica i / stages, as ranks are laid out across processes.
  auto pipeline_of = [&](int i) -> std::unique_ptr<Group>& {
    return pipelines[static_cast<std::size_t>(i / stages)][static_cast<std::size_t>(i % stages)];
  };
  auto stage_group_of = [&](int i) -> std::unique_ptr<Group>& {
    return stage_groups[static_cast<std::size_t>(i % stages)][static_cast<std::size_t>(i / stages)];
  };
  run_threads(
      replicas * stages, [&](int i) { body(*pipeline_of(i), *stage_group_of(i)); },
      [&](int i) {
        pipeline_of(i).reset();
        stage_group_of(i).reset();
      });
}

}  // namespace loco::comm
