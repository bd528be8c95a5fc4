#include "loco/algo/replica_mean.h"

#include "loco/comm/quantized_all_reduce.h"

namespace loco {

std::unique_ptr<comm::Codec> exchange_codec(const std::string& name, std::int64_t block_size) {
  if (name == "fp32") return nullptr;
  return comm::make_codec(name, static_cast<std::size_t>(block_size));
}

double replica_mean(comm::Group& group, torch::Tensor& tensor, const comm::Codec* codec,
                    std::optional<double> weight) {
  torch::NoGradGuard no_grad;
  if (!weight) {
    comm::codec_all_reduce(group, tensor, codec, comm::ReduceOp::mean);
    return group.size();
  }
  tensor.mul_(*weight);
  comm::codec_all_reduce(group, tensor, codec, comm::ReduceOp::sum);
  torch::Tensor total = torch::full({1}, *weight, torch::kFloat64);
  group.all_reduce(total, comm::ReduceOp::sum);
  const double sum = total.item<double>();
  if (sum > 0) tensor.div_(sum);
  return sum;
}

}  // namespace loco
