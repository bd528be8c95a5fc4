#include "loco/pipeline/stages/activation_link.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <cstring>

#include "loco/comm/comm_error.h"
#include "loco/util/seconds_since.h"

namespace loco::pipeline {

ActivationLink::ActivationLink(comm::Group& pipeline, const std::string& codec, std::int64_t block_size)
    : group_(pipeline), codec_name_(codec) {
  if (codec != "fp32") codec_ = comm::make_codec(codec, static_cast<std::size_t>(block_size));
}

namespace {

// Every message ends with its payload's size in 8 bytes (little-endian). A receive posts its buffer with
// that slot zeroed, so a neighbour's shorter message, which Gloo delivers without a word, leaves it zero.
constexpr std::int64_t kTrailerBytes = 8;

}  // namespace

std::int64_t ActivationLink::payload_bytes(std::int64_t values, const torch::TensorOptions& options) const {
  if (codec_) return static_cast<std::int64_t>(codec_->encoded_bytes(static_cast<std::size_t>(values)));
  return values * static_cast<std::int64_t>(c10::elementSize(c10::typeMetaToScalarType(options.dtype())));
}

void ActivationLink::send(const torch::Tensor& values, int to, Message kind) {
  const torch::Tensor flat = values.detach().to(torch::kCPU).contiguous().view({-1});
  const std::int64_t payload = payload_bytes(flat.numel(), flat.options());
  torch::Tensor wire = torch::empty({payload + kTrailerBytes}, torch::kUInt8);
  if (codec_) {
    const torch::Tensor floats = flat.to(torch::kFloat32);
    codec_->encode(floats.data_ptr<float>(), static_cast<std::size_t>(floats.numel()), wire.data_ptr<std::uint8_t>());
  } else {
    std::memcpy(wire.data_ptr(), flat.data_ptr(), static_cast<std::size_t>(payload));
  }
  const auto size = static_cast<std::uint64_t>(payload);
  std::memcpy(wire.data_ptr<std::uint8_t>() + payload, &size, kTrailerBytes);
  wire = wire.to(group_.device());  // the codecs and the trailer work on the host; NCCL moves device tensors
  bytes_sent_ += static_cast<std::uint64_t>(wire.numel());
  sends_.emplace_back(group_.send_async(wire, to, static_cast<int>(kind)), wire);
}

torch::Tensor ActivationLink::receive(const torch::Tensor& like, int from, Message kind) {
  Pending pending = post_receive(like.sizes(), like.options(), from, kind);
  return take(pending);
}

ActivationLink::Pending ActivationLink::post_receive(c10::IntArrayRef shape, const torch::TensorOptions& options,
                                                     int from, Message kind) {
  Pending pending{nullptr, torch::Tensor(), shape.vec(), options, from, kind};
  std::int64_t values = 1;
  for (const auto size : shape) values *= size;
  pending.wire = torch::empty({payload_bytes(values, options) + kTrailerBytes},
                              torch::TensorOptions(torch::kUInt8).device(group_.device()));
  pending.wire.narrow(0, pending.wire.numel() - kTrailerBytes, kTrailerBytes).zero_();
  pending.work = group_.recv_async(pending.wire, from, static_cast<int>(kind));
  return pending;
}

torch::Tensor ActivationLink::take(Pending& pending) {
  const auto waited_from = SteadyClock::now();
  pending.work->wait();
  receive_wait_s_ += seconds_since(waited_from);
  const torch::Tensor wire = pending.wire.to(torch::kCPU);
  const std::int64_t payload = wire.numel() - kTrailerBytes;
  std::uint64_t size = 0;
  std::memcpy(&size, wire.data_ptr<std::uint8_t>() + payload, kTrailerBytes);
  if (size != static_cast<std::uint64_t>(payload)) {
    throw comm::CommError(
        fmt::format("stage {} sent a message ({}) that is not the {} bytes this stage expects: it does not run this "
                    "pipeline's model, micro-batch size or pipeline.codec. Give every stage the same config",
                    pending.from, pending.kind == Message::activation ? "hidden states" : "gradients", payload));
  }
  torch::Tensor values =
      torch::empty(pending.shape, codec_ ? torch::TensorOptions(torch::kFloat32) : pending.options.device(torch::kCPU));
  if (codec_) {
    codec_->decode(wire.data_ptr<std::uint8_t>(), static_cast<std::size_t>(values.numel()), values.data_ptr<float>());
  } else {
    std::memcpy(values.data_ptr(), wire.data_ptr(), static_cast<std::size_t>(payload));
  }
  return values.to(pending.options);
}

void ActivationLink::wait_for_sends() {
  for (auto& [work, tensor] : sends_) work->wait();
  sends_.clear();
}

}  // namespace loco::pipeline
