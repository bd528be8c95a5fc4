#include "loco/algo/replica_mean.h"

#include "loco/comm/quantized_all_reduce.h"

namespace loco {

std::unique_ptr<comm::Codec> exchange_codec(const std::string& name, std::int64_t block_size) {
  if (name == "fp32") return nullptr;
  return comm::make_codec(name, static_cast<std::size_t>(block_size));
}

namespace {

void reduce(comm::Group& group, torch::Tensor& tensor, const comm::Codec* codec, comm::ReduceOp op) {
  if (comm::uses_backend_ring(group, codec)) {
    group.all_reduce(tensor, op);  // any dtype (float64 parity tests)
    return;
  }
  // Codecs work on float32; float64 runs (parity tests) round-trip through it.
  torch::Tensor values = tensor.dtype() == torch::kFloat32 ? tensor : tensor.to(torch::kFloat32);
  comm::codec_all_reduce(group, values, codec, op);
  if (!values.is_same(tensor)) tensor.copy_(values);
}

}  // namespace

double replica_mean(comm::Group& group, torch::Tensor& tensor, const comm::Codec* codec,
                    std::optional<double> weight) {
  torch::NoGradGuard no_grad;
  if (!weight) {
    reduce(group, tensor, codec, comm::ReduceOp::mean);
    return group.size();
  }
  tensor.mul_(*weight);
  reduce(group, tensor, codec, comm::ReduceOp::sum);
  torch::Tensor total = torch::full({1}, *weight, torch::kFloat64);
  group.all_reduce(total, comm::ReduceOp::sum);
  const double sum = total.item<double>();
  if (sum > 0) tensor.div_(sum);
  return sum;
}

}  // namespace loco
