#include "loco/comm/quantized_all_reduce.h"

#include "loco/comm/piecewise_reduce.h"

namespace loco::comm {

void quantized_all_reduce(Group& group, const torch::Tensor& tensor, const Codec& codec, ReduceOp op, Timeout timeout,
                          std::int64_t round_bytes) {
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
      timeout, round_bytes);
}

}  // namespace loco::comm
