// limit_blas_threads (train/runtime.h note "blas-pool") sizes the OpenBLAS pool that libtorch's matmuls
// use; the BLAS Debian's alternatives chose for this test binary is asked what it now has.
#include <gtest/gtest.h>

#include <dlfcn.h>

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
}

}  // namespace
}  // namespace loco
