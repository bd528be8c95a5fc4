#include "loco/comm/quantized_all_reduce.h"

#include "loco/comm/link/round_size.h"
#include "loco/util/seconds_since.h"

namespace loco::comm {

void quantized_all_reduce(Group& group, const torch::Tensor& tensor, const Codec& codec, ReduceOp op, Timeout timeout,
                          ExchangeTimes* times) {
  const int size = group.size();
  // 3. The sum of my piece in fp32, in rank order.
  piecewise_reduce(
      group, tensor, codec,
      [&](const PieceContributions& from, float* sum) {
        const auto count = static_cast<std::size_t>(from.values);
        for (int source = 0; source < from.count; ++source) {
          codec.decode_add(from.bytes + source * from.piece_bytes, count, sum);
        }
        if (op == ReduceOp::mean) {
          for (std::size_t i = 0; i < count; ++i) sum[i] /= static_cast<float>(size);
        }
      },
      timeout, times);
}

bool uses_backend_ring(const Group& group, const Codec* codec, std::int64_t bytes) {
  const bool fp32 = codec == nullptr || codec->kind() == CodecKind::kFp32;
  if (!fp32) return false;
  const std::int64_t round_bytes = group.round_bytes_per_peer(group.size());
  if (round_bytes == 0 || round_bytes * group.size() >= bytes) return true;
  // Note "fp32-ring": a round size the user gave paces fp32 at any rate; auto only on slow links.
  if (group.options().round_size.mode != RoundSize::Mode::automatic) return false;
  constexpr double kRingFromBps = 50e6;
  const auto link = link_for_rounds(group.options().link, group.measured_link().estimate());
  return link && link->bandwidth_bps >= kRingFromBps;
}

void codec_all_reduce(Group& group, const torch::Tensor& tensor, const Codec* codec, ReduceOp op,
                      ExchangeTimes* times) {
  if (uses_backend_ring(group, codec, tensor.numel() * 4)) {
    const auto started = std::chrono::steady_clock::now();
    group.all_reduce(tensor, op);
    // Note "measured-link": the ring's 2(N − 1) steps each send 1/N of the tensor.
    const int n = group.size();
    const double sent = 2.0 * (n - 1) / n * static_cast<double>(tensor.numel() * tensor.element_size());
    if (group.measures_link() && sent >= LinkFit::kMinSampleBytes) {
      group.learn_link({{sent, 2.0 * (n - 1), seconds_since(started)}});
    }
    return;
  }
  static const auto fp32 = make_codec("fp32");
  // Codecs work on float32; float64 tensors (parity tests) round-trip through it.
  const torch::Tensor values = tensor.scalar_type() == torch::kFloat32 ? tensor : tensor.to(torch::kFloat32);
  quantized_all_reduce(group, values, codec != nullptr ? *codec : *fp32, op, kGroupTimeout, times);
  if (!values.is_same(tensor)) tensor.copy_(values);
}

}  // namespace loco::comm
