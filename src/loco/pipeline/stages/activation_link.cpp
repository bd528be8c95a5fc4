#include "loco/pipeline/stages/activation_link.h"

#include <torch/torch.h>

#include "loco/util/seconds_since.h"

namespace loco::pipeline {

ActivationLink::ActivationLink(comm::Group& pipeline, const std::string& codec, std::int64_t block_size)
    : group_(pipeline), codec_name_(codec) {
  if (codec != "fp32") codec_ = comm::make_codec(codec, static_cast<std::size_t>(block_size));
}

std::int64_t ActivationLink::wire_elements(std::int64_t values) const {
  return codec_ ? static_cast<std::int64_t>(codec_->encoded_bytes(static_cast<std::size_t>(values))) : values;
}

void ActivationLink::send(const torch::Tensor& values, int to, Message kind) {
  torch::Tensor wire;
  if (codec_) {
    const torch::Tensor floats = values.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    wire = torch::empty({wire_elements(floats.numel())}, torch::kUInt8);
    codec_->encode(floats.data_ptr<float>(), static_cast<std::size_t>(floats.numel()), wire.data_ptr<std::uint8_t>());
    wire = wire.to(group_.device());  // the codecs work on the host; NCCL moves device tensors
  } else {
    // A copy: the sender's tensor is part of its autograd graph and may be freed or reused.
    wire = values.detach().to(group_.device(), /*non_blocking=*/false, /*copy=*/true).contiguous();
  }
  bytes_sent_ += static_cast<std::uint64_t>(wire.numel() * wire.element_size());
  sends_.emplace_back(group_.send_async(wire, to, static_cast<int>(kind)), wire);
}

torch::Tensor ActivationLink::receive(const torch::Tensor& like, int from, Message kind) {
  Pending pending = post_receive(like.sizes(), like.options(), from, kind);
  return take(pending);
}

ActivationLink::Pending ActivationLink::post_receive(c10::IntArrayRef shape, const torch::TensorOptions& options,
                                                     int from, Message kind) {
  Pending pending{nullptr, torch::Tensor(), shape.vec(), options};
  std::int64_t values = 1;
  for (const auto size : shape) values *= size;
  pending.wire =
      codec_ ? torch::empty({wire_elements(values)}, torch::TensorOptions(torch::kUInt8).device(group_.device()))
             : torch::empty(shape, options.device(group_.device()));
  pending.work = group_.recv_async(pending.wire, from, static_cast<int>(kind));
  return pending;
}

torch::Tensor ActivationLink::take(Pending& pending) {
  const auto waited_from = SteadyClock::now();
  pending.work->wait();
  receive_wait_s_ += seconds_since(waited_from);
  if (!codec_) return pending.wire.to(pending.options.device());
  const torch::Tensor wire = pending.wire.to(torch::kCPU);
  torch::Tensor floats = torch::empty(pending.shape, torch::kFloat32);
  codec_->decode(wire.data_ptr<std::uint8_t>(), static_cast<std::size_t>(floats.numel()), floats.data_ptr<float>());
  return floats.to(pending.options);
}

void ActivationLink::wait_for_sends() {
  for (auto& [work, tensor] : sends_) work->wait();
  sends_.clear();
}

}  // namespace loco::pipeline
