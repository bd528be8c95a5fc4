// limit_blas_threads (train/runtime.h note "blas-pool") sizes the OpenBLAS pool that libtorch's matmuls
// use; the BLAS Debian's alternatives chose for this test binary is asked what it now has. train.threads = 0
// (note "auto-threads") is one intra-op thread on the CPU and every core with CUDA.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <thread>

#include "loco/train/runtime.h"

namespace loco {
namespace {

TEST(BlasThreads, LimitSetsTheOpenBlasPoolToTheGivenCount) {
  using GetThreads = int (*)();
  const auto get = reinterpret_cast<GetThreads>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (get == nullptr) GTEST_SKIP() << "this libblas is not OpenBLAS: limit_blas_threads leaves it as it is";
  const int before = get();
  limit_blas_threads(1);
  EXPECT_EQ(get(), 1);
  limit_blas_threads(2);
  EXPECT_EQ(get(), 2);
  limit_blas_threads(before);
  EXPECT_EQ(get(), before);
  limit_blas_threads(0);  // auto: replicas that share the cores call it with one thread each
  EXPECT_EQ(get(), 1);
  limit_blas_threads(before);
}

TEST(BlasThreads, AutomaticThreadsDependOnTheDevice) {
  EXPECT_EQ(intra_op_threads(0, torch::kCPU), 1);
  EXPECT_EQ(intra_op_threads(3, torch::kCPU), 3);
  EXPECT_EQ(intra_op_threads(2, torch::Device(torch::kCUDA)), 2);
  const auto cores = static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(intra_op_threads(0, torch::Device(torch::kCUDA)), cores);
  configure_threads(0, torch::kCPU);
  EXPECT_EQ(torch::get_num_threads(), 1);
}

}  // namespace
}  // namespace loco
