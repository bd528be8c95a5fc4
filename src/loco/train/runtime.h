// Process-wide set-up shared by train, eval and generate: device choice and CPU threads.
#pragma once

#include <torch/types.h>

#include <string>

namespace loco {

// "cpu", "cuda" or "auto" (CUDA when this libtorch and machine have it); ConfigError for cuda
// without a CUDA build or device, naming `setting`, where the user chose it ("train.device", "--device").
torch::Device resolve_device(const std::string& name, const std::string& setting);

// Note "auto-threads": train.threads = 0 lets loco choose, from the device. On the CPU one intra-op thread:
// OpenBLAS (libopenblas0-pthread) already runs every matmul on a pool of its own, one thread per core
// ("blas-pool" below), and torch's intra-op threads on top of it contend with that pool for the same cores.
// On this 2-core VM one intra-op thread trained faster than two at every size measured, from 140K to 125M
// parameters (docs/results.md "Threads": 1.3-4x). On CUDA every core: the host's share of the work (the
// outer step on host copies, the codecs, evaluation batches) is then all the CPU does. A positive value
// is taken as it is. Machines with more than 2 cores were not measured.
std::int64_t intra_op_threads(std::int64_t configured, const torch::Device& device);

// Intra-op threads for `device` (intra_op_threads) and the allocator policy below.
void configure_threads(std::int64_t threads, const torch::Device& device);

// Note "blas-pool": OpenBLAS (Debian's libopenblas0-pthread, which libtorch's matmuls call) keeps a pool
// of its own threads, one per core, that torch::set_num_threads does not reach. One replica gains from it,
// but when replicas run as threads of one process their concurrent calls queue for that pool and its
// workers spin: on this 2-core VM, 4 replicas of a 1.3M model trained at 2.7K tokens/s with the pool and
// 13.2K with one BLAS thread per call (2 replicas: 5.1K and 13.7K; one replica alone: 11.3K with the pool,
// 8.3K without, so it keeps it). Ranks in processes of their own that share a machine (LOCAL_WORLD_SIZE
// > 1) run one pool each on the same cores: 2 Gloo ranks of small-5m on this VM stepped in 1.20-1.46 s with
// the pools and 1.00-1.04 s with one BLAS thread each. Called once, before two or more replica threads start or
// in such a rank, it sizes the pool to `threads` per call (one for 0, note "auto-threads"); a BLAS without that
// setting is left as it is.
void limit_blas_threads(std::int64_t threads);

// The threads OpenBLAS now uses per call (limit_blas_threads); 0 for a BLAS that does not say.
int blas_threads_per_call();

// Note "allocator": glibc serves allocations above 32 MiB with fresh mmap()s and returns them on
// free, so every step faults the (B·T, vocab) logits and other large activations in again, page by
// page. On the VMs we measured a page fault costs ~10 µs and this alone slowed training several-fold.
// Keeping freed memory in the heap (no mmap for large blocks, no trimming) removes it; training
// reuses the same sizes every step, so the heap does not grow beyond the peak. Threads other than the
// main one would get arenas of their own, built of 64 MiB mmap()ed heaps that glibc unmaps as soon as
// they empty, whatever the trim threshold: replicas as threads faulted their activations in again
// every step (4 replicas, 40 steps of the 726K-parameter study model: 310-480K page faults and 2.6-4.1 s
// of system time, against 100K and 1.1 s with one arena, and a fifth less wall time: docs/results.md).
// So every thread shares the main arena; call this before the replica threads start (a thread takes its
// arena at its first malloc).
void keep_freed_memory_in_heap();

}  // namespace loco
