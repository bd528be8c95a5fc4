#include "loco/algo/ddp.h"

#include <fmt/format.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/variable.h>

#include "loco/util/error.h"

namespace loco {

namespace {

// Runs after AccumulateGrad has added this backward's gradient into the parameter's .grad.
class GradientReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  explicit GradientReadyHook(std::function<void()> ready) : ready_(std::move(ready)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    ready_();
    return outputs;
  }

 private:
  std::function<void()> ready_;
};

}  // namespace

// The gradient accumulators are held here: autograd keeps only a weak reference, and a new one
// (without our hook) would be made for the next backward if this were the last owner.
struct DataParallel::Hooks {
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
};

DataParallel::DataParallel(const DdpConfig& config, const ReplicaContext& context)
    : config_(config), context_(context), link_(*context.clock), hooks_(std::make_unique<Hooks>()) {}

DataParallel::~DataParallel() = default;

std::string DataParallel::describe() const {
  return fmt::format("ddp: gradient mean every step, {} buckets (cap {} MiB, first {} MiB), overlap {}, M={}",
                     buckets_.size(), config_.bucket_mb, config_.first_bucket_mb,
                     config_.overlap ? "on" : "off", context_.group->size());
}

void DataParallel::attach(Llama&, const FlatParameters& parameters) {
  const std::int64_t element_bytes = parameters.buffer(0).element_size();
  constexpr double kMiB = 1024.0 * 1024.0;
  buckets_ = make_gradient_buckets(parameters, element_bytes, config_.first_bucket_mb * kMiB,
                                   config_.bucket_mb * kMiB);
  bucket_of_parameter_.assign(parameters.slots().size(), 0);
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const GradientBucket& bucket = buckets_[b];
    bucket_gradients_.push_back(parameters.buffer(bucket.group).grad().narrow(0, bucket.offset, bucket.numel));
    for (std::size_t p : bucket.parameters) bucket_of_parameter_[p] = b;
  }
  pending_parameters_.assign(buckets_.size(), 0);
  if (!config_.overlap) return;
  // The model's parameter tensors share their autograd identity with the slots, in slot order.
  const auto params = parameters.parameter_tensors();
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params[i]);
    LOCO_CHECK(accumulator != nullptr, "parameter {} has no gradient accumulator", parameters.slots()[i].name);
    accumulator->add_post_hook(std::make_unique<GradientReadyHook>([this, i] { parameter_ready(i); }));
    hooks_->accumulators.push_back(std::move(accumulator));
  }
}

void DataParallel::before_backward(bool last) {
  communicate_ = last;
  if (!last) return;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    pending_parameters_[b] = static_cast<std::int64_t>(buckets_[b].parameters.size());
  }
}

void DataParallel::parameter_ready(std::size_t parameter) {
  if (!communicate_) return;
  --pending_parameters_[bucket_of_parameter_[parameter]];
  launch_ready_buckets();
}

void DataParallel::launch_ready_buckets() {
  while (next_to_launch_ < buckets_.size() && pending_parameters_[next_to_launch_] == 0) launch(next_to_launch_++);
}

void DataParallel::launch(std::size_t bucket) {
  comm::Group& group = *context_.group;
  // The link carries one bucket after another.
  link_.queue(group, [&] {
    launched_.push_back(group.all_reduce_async(bucket_gradients_[bucket], comm::ReduceOp::mean));
  });
}

void DataParallel::after_backward() {
  while (next_to_launch_ < buckets_.size()) launch(next_to_launch_++);
  for (auto& work : launched_) work->wait();
  link_.wait();
  launched_.clear();
  next_to_launch_ = 0;
  communicate_ = false;
}

}  // namespace loco
