#include "loco/comm/c10d/c10d_group.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "loco/comm/c10d/c10d_compat.h"
#include "loco/comm/c10d/c10d_errors.h"
#include "loco/comm/c10d/c10d_rendezvous.h"
#include "loco/comm/comm_error.h"
#include "loco/util/error.h"
#include "loco/util/host_port.h"
#include "loco/util/stop_requested.h"

namespace loco::comm {

namespace {

using Clock = std::chrono::steady_clock;

class C10dWork final : public Work {
 public:
  // `stamp_completion`: record when the backend finished (Gloo's collectives complete their future from
  // the worker thread that ran them; NCCL's future completes when the kernel is queued, so not there).
  C10dWork(c10::intrusive_ptr<c10d::Work> work, std::vector<at::Tensor> keep_alive, Timeout timeout,
           std::string context, std::function<bool()> abandoned, bool stamp_completion)
      : work_(std::move(work)),
        keep_alive_(std::move(keep_alive)),
        timeout_(timeout),
        context_(std::move(context)),
        abandoned_(std::move(abandoned)) {
    if (stamp_completion) {
      work_->getFuture()->addCallback([finished = finished_](c10::ivalue::Future&) {
        finished->store(Clock::now().time_since_epoch().count());
      });
    }
  }

  void wait() override {
    if (abandoned_) {
      // GroupOptions::abandoned: polls instead of blocking, so that a broken quorum ends the wait at once.
      while (!work_->isCompleted()) {
        if (abandoned_()) throw PeerLost(fmt::format("{} given up: the group was abandoned", context_));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    try {
      work_->wait(timeout_);
    } catch (const CommError&) {
      throw;
    } catch (const std::exception& e) {
      throw_typed(e, context_, /*group_is_up=*/true);
    }
  }
  bool is_completed() override { return work_->isCompleted(); }
  std::optional<Clock::time_point> completed_at() const override {
    const Clock::rep finished = finished_->load();
    if (finished == 0) return std::nullopt;
    return Clock::time_point(Clock::duration(finished));
  }

 private:
  // The backend's completion time since the clock's epoch; 0 until it is known.
  std::shared_ptr<std::atomic<Clock::rep>> finished_ = std::make_shared<std::atomic<Clock::rep>>(0);
  c10::intrusive_ptr<c10d::Work> work_;
  std::vector<at::Tensor> keep_alive_;  // c10d holds its own references too; this makes it explicit
  Timeout timeout_;
  std::string context_;
  std::function<bool()> abandoned_;
};

class C10dGroup final : public Group {
 public:
  C10dGroup(const C10dOptions& options, c10::intrusive_ptr<c10d::Store> store,
            c10::intrusive_ptr<C10dBackend> process_group, torch::Device device)
      : Group(options.rank, options.world_size, options.group),
        name_(options.backend),
        store_(std::move(store)),
        process_group_(std::move(process_group)),
        device_(device) {}

  std::string backend() const override { return name_; }
  torch::Device device() const override { return device_; }

 protected:
  WorkHandle start_all_reduce_sum(const torch::Tensor& tensor, Timeout timeout) override {
    if (tensor.numel() == 0) return completed_work();  // same shape on every rank
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions options;
    options.timeout = timeout;
    return run("all_reduce", timeout, tensors, [&] { return process_group_->allreduce(tensors, options); });
  }

  WorkHandle start_all_gather(const torch::Tensor& input, const torch::Tensor& output, Timeout timeout) override {
    if (input.numel() == 0) return completed_work();
    std::vector<at::Tensor> inputs{input};
    std::vector<std::vector<at::Tensor>> outputs{output.view({-1}).chunk(size())};
    c10d::AllgatherOptions options;
    options.timeout = timeout;
    return run("all_gather", timeout, {input, output},
               [&] { return process_group_->allgather(outputs, inputs, options); });
  }

  WorkHandle start_all_to_all(const torch::Tensor& input, const torch::Tensor& output,
                              const std::vector<std::int64_t>& input_splits,
                              const std::vector<std::int64_t>& output_splits, Timeout timeout) override {
    at::Tensor flat_input = input.view({-1});
    at::Tensor flat_output = output.view({-1});
    std::vector<std::int64_t> input_counts = input_splits;
    std::vector<std::int64_t> output_counts = output_splits;
    c10d::AllToAllOptions options;
    options.timeout = timeout;
    return run("all_to_all", timeout, {input, output}, [&] {
      return process_group_->alltoall_base(flat_output, flat_input, output_counts, input_counts, options);
    });
  }

  WorkHandle start_broadcast(const torch::Tensor& tensor, int root, Timeout timeout) override {
    if (tensor.numel() == 0) return completed_work();
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    options.timeout = timeout;
    return run("broadcast", timeout, tensors, [&] { return process_group_->broadcast(tensors, options); });
  }

  WorkHandle start_send(const torch::Tensor& tensor, int destination, int tag, Timeout timeout) override {
    check_tag(tag);
    std::vector<at::Tensor> tensors{tensor};
    return run(fmt::format("send to rank {}", destination), timeout, tensors,
               [&] { return process_group_->send(tensors, destination, tag); }, /*pollable=*/false);
  }

  WorkHandle start_recv(const torch::Tensor& tensor, int source, int tag, Timeout timeout) override {
    check_tag(tag);
    std::vector<at::Tensor> tensors{tensor};
    return run(fmt::format("recv from rank {}", source), timeout, tensors,
               [&] { return process_group_->recv(tensors, source, tag); }, /*pollable=*/false);
  }

  WorkHandle start_barrier(Timeout timeout) override {
    c10d::BarrierOptions options;
    options.timeout = timeout;
    return run("barrier", timeout, {}, [&] { return process_group_->barrier(options); });
  }

 private:
  // NCCL ignores tags: messages between two ranks travel in the order they were started, on one
  // stream. A tagged message there would silently match another, so it is refused.
  void check_tag(int tag) const {
    LOCO_CHECK(tag == 0 || name_ != "nccl",
               "NCCL has no message tags (tag {} given): use tag 0 and post sends and "
               "receives between two ranks in the same order on both",
               tag);
  }

  // `pollable`: whether the operation reports completion before wait() (collectives do; Gloo's send and
  // recv only in wait(), so GroupOptions::abandoned cannot watch them).
  template <typename Start>
  WorkHandle run(const std::string& operation, Timeout timeout, std::vector<at::Tensor> tensors, Start&& start,
                 bool pollable = true) {
    const std::string context = fmt::format("{} on rank {} ({})", operation, rank(), name_);
    try {
      return std::make_shared<C10dWork>(start(), std::move(tensors), timeout, context,
                                        pollable ? options().abandoned : nullptr, pollable && name_ == "gloo");
    } catch (const std::exception& e) {
      throw_typed(e, context, /*group_is_up=*/true);
    }
  }

  std::string name_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<C10dBackend> process_group_;
  torch::Device device_;
};

#ifdef USE_C10D_GLOO
c10::intrusive_ptr<C10dBackend> make_gloo(const C10dOptions& options, const c10::intrusive_ptr<c10d::Store>& store) {
  // libtorch 1.13 fixes Gloo's timeout for the connections when the group is built, and both the
  // handshake and every later operation run under it; per-call timeouts can only be shorter.
  auto gloo_options =
      c10d::ProcessGroupGloo::Options::create(std::max(options.rendezvous_timeout, options.group.timeout));
  // A paced exchange keeps up to kMaxRoundsInFlight rounds started (link/round_size.h, "Rounds in
  // flight"); over a link with real latency each needs a thread of its own to be on the wire at once (the
  // threads wait on a queue, idle, otherwise). Where the latency is injected in-process (note
  // "latency-injection"), one thread carries the rounds' bytes one after another, as a real link's
  // pipeline does, and the injection adds each round's latency from its own completion.
  // (comm.delay without an emulated link injects nothing: the real link's threads.)
  const bool injected = options.group.delay != LinkDelay::none && options.group.link.emulates_anything();
  gloo_options->threads = injected ? 1 : kMaxRoundsInFlight;
  if (!options.interface.empty()) {
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(options.interface));
  } else {
    const auto address = local_address_towards(options.master_addr, options.master_port);
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(address));
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, options.rank, options.world_size, gloo_options);
}
#endif

#ifdef USE_C10D_NCCL
c10::intrusive_ptr<C10dBackend> make_nccl(const C10dOptions& options, const c10::intrusive_ptr<c10d::Store>& store) {
  auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
  nccl_options->timeout = options.group.timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, options.rank, options.world_size, nccl_options);
}
#endif

}  // namespace

bool c10d_backend_available(const std::string& backend) {
#ifdef USE_C10D_GLOO
  if (backend == "gloo") return true;
#endif
#ifdef USE_C10D_NCCL
  if (backend == "nccl") return torch::cuda::is_available();
#endif
  return false;
}

std::unique_ptr<Group> make_c10d_group(const C10dOptions& options) {
  if (!c10d_backend_available(options.backend)) {
    throw CommError(fmt::format(
        "this build of loco cannot use the '{}' backend (gloo needs libgloo-dev at build time; nccl needs a CUDA "
        "libtorch and a GPU). Use another backend, or rebuild (docs/build.md).",
        options.backend));
  }
  auto store = connect_store(options);
  const std::string context = fmt::format("rendezvous of rank {} of {} at {}", options.rank, options.world_size,
                                          host_port(options.master_addr, options.master_port));
  try {
    // The store's own calls fail as libtorch's errors too (a store that closes the connection: "Broken pipe"),
    // which must reach the caller as a CommError, to be retried, like a failed handshake.
    announce_world_size(*store, options);
    require_same_world_size(*store, options);  // those that came before this rank
    claim_rank(*store, options);
    if (options.group.abandoned || options.group.stopping) await_every_rank(*store, options);
#ifdef USE_C10D_NCCL
    if (options.backend == "nccl") {
      const torch::Device device(torch::kCUDA, static_cast<c10::DeviceIndex>(options.cuda_device));
      return std::make_unique<C10dGroup>(options, store, make_nccl(options, store), device);
    }
#endif
#ifdef USE_C10D_GLOO
    return std::make_unique<C10dGroup>(options, store, make_gloo(options, store), torch::Device(torch::kCPU));
#endif
  } catch (const CommError&) {
    throw;
  } catch (const StopRequested&) {
    throw;
  } catch (const std::exception& e) {
    // A stop's signal may have ended a store call ("Interrupted system call"): a stop, not a failure.
    stop_if_asked(options, "meet the others at the rendezvous");
    try {
      require_same_world_size(*store, options);  // those that came after, if the store is still there
    } catch (const CommError&) {
      throw;
    } catch (const std::exception&) {
      // The store is gone too: the first failure says what happened.
    }
    throw_typed(e, context, /*group_is_up=*/false);
  }
  throw CommError(fmt::format("{}: no backend named '{}'", context, options.backend));
}

}  // namespace loco::comm
