// The few places where libtorch 1.13 (Debian, CPU) and 2.x (PyTorch wheels, CUDA) differ.
// Everything version-dependent is decided here and nowhere else.
#pragma once

#include <torch/version.h>

// Fused scaled-dot-product attention (flash / memory-efficient kernels) arrived in 2.0.
#if TORCH_VERSION_MAJOR >= 2
#define LOCO_HAS_SDPA 1
#else
#define LOCO_HAS_SDPA 0
#endif

#include <ATen/autocast_mode.h>
#include <c10/util/string_utils.h>
#include <torch/optim/optimizer.h>

#include <type_traits>

namespace loco::compat {

// Key of a parameter in torch::optim::Optimizer::state(): a string of the TensorImpl address in
// 1.13, the address itself in later releases. Deduced from the map's type rather than the version.
template <typename Key = typename std::decay_t<
              decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type>
Key optimizer_state_key(const torch::Tensor& param) {
  if constexpr (std::is_same_v<Key, std::string>) {
    return c10::guts::to_string(param.unsafeGetTensorImpl());
  } else {
    return static_cast<Key>(param.unsafeGetTensorImpl());
  }
}

// bf16 autocast for CUDA ops on this thread while the guard lives (the API was renamed in 2.4).
// Leaving clears autocast's cache of bf16 weight copies, as Python's autocast.__exit__ does:
// kept across optimizer steps, those copies would go stale.
class CudaBf16Autocast {
 public:
  explicit CudaBf16Autocast(bool enabled) : enabled_(enabled) {
    if (!enabled_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    at::autocast::set_autocast_enabled(at::kCUDA, true);
#else
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(true);
#endif
  }
  ~CudaBf16Autocast() {
    if (!enabled_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(at::kCUDA, false);
#else
    at::autocast::set_enabled(false);
#endif
    at::autocast::clear_cache();
  }
  CudaBf16Autocast(const CudaBf16Autocast&) = delete;
  CudaBf16Autocast& operator=(const CudaBf16Autocast&) = delete;

 private:
  bool enabled_;
};

}  // namespace loco::compat
