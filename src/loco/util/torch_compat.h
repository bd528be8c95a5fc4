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

// at::autocast's per-device API (is_autocast_enabled(kCUDA), ...) replaced the CUDA-only one in 2.4.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define LOCO_AUTOCAST_DEVICE_API 1
#else
#define LOCO_AUTOCAST_DEVICE_API 0
#endif

// at::rms_norm arrived in 2.4 (composite); from 2.8 it runs as one fused CUDA kernel forward and one
// backward instead of the ~5 + ~10 element-wise passes of the op-by-op formula.
#if LOCO_AUTOCAST_DEVICE_API
#define LOCO_HAS_RMS_NORM 1
#else
#define LOCO_HAS_RMS_NORM 0
#endif

#include <ATen/autocast_mode.h>
#include <torch/optim/optimizer.h>

#include <sstream>
#include <string>
#include <type_traits>

namespace loco::compat {

// Key of a parameter in torch::optim::Optimizer::state(): a string of the TensorImpl address in
// 1.13, the address itself in later releases. Deduced from the map's type rather than the version.
// The string is what 1.13's c10::guts::to_string writes for a pointer (operator<<), without that
// internal helper (and its header), which later releases need not keep.
template <typename Key = typename std::decay_t<
              decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type>
Key optimizer_state_key(const torch::Tensor& param) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream out;
    out << param.unsafeGetTensorImpl();
    return out.str();
  } else {
    return static_cast<Key>(param.unsafeGetTensorImpl());
  }
}

// bf16 autocast for CUDA ops on this thread while the guard lives (the API was renamed in 2.4).
// Leaving clears autocast's cache of bf16 weight copies, as Python's autocast.__exit__ does:
// kept across optimizer steps, those copies would go stale. `cache_casts = false` casts a weight again
// wherever it is read instead of caching the copy, which work captured in a CUDA graph needs (as
// Python's autocast(cache_enabled=False)): a cached copy made during the capture would outlive it.
class CudaBf16Autocast {
 public:
  explicit CudaBf16Autocast(bool enabled, bool cache_casts = true)
      : enabled_(enabled), cached_before_(at::autocast::is_autocast_cache_enabled()) {
    if (!enabled_) return;
    at::autocast::set_autocast_cache_enabled(cache_casts);
#if LOCO_AUTOCAST_DEVICE_API
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    at::autocast::set_autocast_enabled(at::kCUDA, true);
#else
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(true);
#endif
  }
  ~CudaBf16Autocast() {
    if (!enabled_) return;
#if LOCO_AUTOCAST_DEVICE_API
    at::autocast::set_autocast_enabled(at::kCUDA, false);
#else
    at::autocast::set_enabled(false);
#endif
    at::autocast::clear_cache();
    at::autocast::set_autocast_cache_enabled(cached_before_);
  }
  CudaBf16Autocast(const CudaBf16Autocast&) = delete;
  CudaBf16Autocast& operator=(const CudaBf16Autocast&) = delete;

 private:
  bool enabled_;
  bool cached_before_;
};

// `x` in the dtype CUDA autocast gives matmul inputs (bf16) when autocast is on and x is a CUDA
// floating-point tensor; x itself otherwise. Autocast casts a float32 input again for every matmul
// that reads it (q, k and v: three casts forward, three back); casting once where several read it
// gives the same forward pass in fewer passes over memory. Backward, the readers' bf16 gradients are
// then summed before the one cast to float32 rather than after three.
inline torch::Tensor to_autocast_dtype(const torch::Tensor& x) {
  if (!x.is_cuda() || !x.is_floating_point()) return x;
#if LOCO_AUTOCAST_DEVICE_API
  if (!at::autocast::is_autocast_enabled(at::kCUDA)) return x;
  return x.to(at::autocast::get_autocast_dtype(at::kCUDA));
#else
  if (!at::autocast::is_enabled()) return x;
  return x.to(at::autocast::get_autocast_gpu_dtype());
#endif
}

// weight · x / sqrt(mean(x²) + eps) over the last dimension through at::rms_norm where libtorch
// has it; an undefined tensor where it does not (the caller then computes it op by op).
inline torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
#if LOCO_HAS_RMS_NORM
  const std::int64_t dim = x.size(-1);
  return at::rms_norm(x, at::IntArrayRef(&dim, 1), weight, eps);
#else
  (void)x, (void)weight, (void)eps;
  return {};
#endif
}

}  // namespace loco::compat
