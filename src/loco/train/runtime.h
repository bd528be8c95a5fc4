// Process-wide set-up shared by train, eval and generate: device choice and CPU threads.
#pragma once

#include <torch/types.h>

#include <string>

namespace loco {

// "cpu", "cuda" or "auto" (CUDA when this libtorch and machine have it); ConfigError for cuda
// without a CUDA build or device.
torch::Device resolve_device(const std::string& name);

// Intra-op threads: `threads`, or every core for 0.
void configure_threads(std::int64_t threads);

}  // namespace loco
