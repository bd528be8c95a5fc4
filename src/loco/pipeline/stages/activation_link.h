// What neighbouring pipeline stages send each other (docs/pipeline.md "Activations"): a micro-batch's
// hidden states forward, their gradients backward, over the replica's pipeline group, in the codec of
// pipeline.codec. fp32 sends the values' bytes as they are (float64 models too); the other codecs of comm/codecs
// send its values encoded (bf16: 2 bytes a value; int8, fp4, int4: blocks of comm.block_size values with
// a scale), and the receiver trains on what it decodes, as a real link would give it.
//
// Both ends know every message's shape and dtype from their own configs, which the stages compared at
// set-up (StageRunner), so a message of another size is a neighbour that does not run this pipeline. Each
// message ends with its size: a shorter one (which Gloo delivers silently) is refused with a CommError
// naming the stage. A longer one makes Gloo 1.13's transport abort the receiving process (an enforce in
// its I/O thread, which loco cannot catch; docs/security.md). A receive waits at most comm.timeout_s.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "loco/comm/codecs/codec.h"
#include "loco/comm/group.h"

namespace loco::pipeline {

// The kinds of message, one tag each: a pair of stages may carry more than one kind in one direction.
enum class Message : int { activation = 1, gradient = 2, tied_gradient = 3 };

class ActivationLink {
 public:
  // `codec`: a name of comm/codecs ("fp32", "bf16", "int8", "fp4", "int4"); `block_size` its scale blocks.
  ActivationLink(comm::Group& pipeline, const std::string& codec, std::int64_t block_size);

  // Starts sending `values` to stage `to`; the link keeps what it sends until wait_for_sends().
  void send(const torch::Tensor& values, int to, Message kind);
  // A tensor of `like`'s shape, dtype and device from stage `from` (blocks until it arrives).
  torch::Tensor receive(const torch::Tensor& like, int from, Message kind);

  // A receive posted ahead of its use: Gloo moves a message only once its receive is posted, so a stage
  // that posted its step's receives at the start lets its neighbours' messages cross while it computes,
  // instead of one message per wait (on a slow link, a step of waits). Receives of one kind from one
  // stage are matched to sends in order.
  struct Pending {
    comm::WorkHandle work;
    torch::Tensor wire;  // what arrives: the values' bytes or their encoding, then the size
    std::vector<std::int64_t> shape;
    torch::TensorOptions options;
    int from = 0;
    Message kind = Message::activation;
  };
  Pending post_receive(c10::IntArrayRef shape, const torch::TensorOptions& options, int from, Message kind);
  // Waits for a posted receive (the wait counts in receive_wait_s) and decodes it.
  torch::Tensor take(Pending& pending);
  // Waits for every send started (they must complete before the step ends: the next step's messages
  // would otherwise overtake nothing, but a failed send would go unnoticed).
  void wait_for_sends();

  // Bytes this stage sent so far, as encoded, and the seconds it waited for what it received.
  std::uint64_t bytes_sent() const { return bytes_sent_; }
  double receive_wait_s() const { return receive_wait_s_; }
  const std::string& codec_name() const { return codec_name_; }

 private:
  // Bytes of `values` values of `options`' dtype on the wire, before the size that ends each message.
  std::int64_t payload_bytes(std::int64_t values, const torch::TensorOptions& options) const;

  comm::Group& group_;
  std::string codec_name_;
  std::unique_ptr<comm::Codec> codec_;                             // null for fp32: the tensor goes as it is
  std::vector<std::pair<comm::WorkHandle, torch::Tensor>> sends_;  // in flight, with what they send
  std::uint64_t bytes_sent_ = 0;
  double receive_wait_s_ = 0;
};

}  // namespace loco::pipeline
