// c10d's class names moved between libtorch 1.13 and 2.x (note "torch-compat" in
// util/torch_compat.h): the Gloo and NCCL process groups derive from c10d::ProcessGroup in 1.13 and
// from c10d::Backend in 2.x. Only C10dGroup includes this.
#pragma once

#include <torch/version.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace loco::comm {

#if TORCH_VERSION_MAJOR >= 2
using C10dBackend = c10d::Backend;
#else
using C10dBackend = c10d::ProcessGroup;
#endif

}  // namespace loco::comm
