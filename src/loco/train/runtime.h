// Process-wide set-up shared by train, eval and generate: device choice and CPU threads.
#pragma once

#include <torch/types.h>

#include <string>

namespace loco {

// "cpu", "cuda" or "auto" (CUDA when this libtorch and machine have it); ConfigError for cuda
// without a CUDA build or device.
torch::Device resolve_device(const std::string& name);

// Intra-op threads (`threads`, or every core for 0) and the allocator policy below.
void configure_threads(std::int64_t threads);

// Note "allocator": glibc serves allocations above 32 MiB with fresh mmap()s and returns them on
// free, so every step faults the (B·T, vocab) logits and other large activations in again, page by
// page. On the VMs we measured a page fault costs ~10 µs and this alone slowed training several-fold.
// Keeping freed memory in the heap (no mmap for large blocks, no trimming) removes it; training
// reuses the same sizes every step, so the heap does not grow beyond the peak.
void keep_freed_memory_in_heap();

}  // namespace loco
