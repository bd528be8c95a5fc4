// Note "cuda-graphs": on a GPU a training step is thousands of small kernels, and launching them one by one
// from the host leaves the GPU idle between them (43 ms of a 791 ms step at 125M, docs/results.md "GPU").
// A CUDA graph records a piece of work's kernels once and launches all of them with one call afterwards.
// The trainer captures two pieces (train.cuda_graphs): a micro-batch's forward and backward, replayed once
// per micro-batch, and the update (clipping and the fused AdamW), replayed once per step.
//
// What a captured piece may do: read and write tensors that stay where they are (the parameters and
// their gradient buffers, the optimizer's moments, the static input buffers the caller copies each
// micro-batch into, outputs it keeps), read no host value that changes between calls (the learning rate
// and the step count are device tensors) and never wait for the device. Host-side effects of the work
// happen once, at capture, not at each replay.
//
// This header needs no CUDA headers: the CPU build compiles it (and never captures).
#pragma once

#include <functional>
#include <memory>

namespace loco {

// Whether this build can capture CUDA graphs: a CUDA libtorch >= 2.4 (CMake option LOCO_CUDA_GRAPHS).
bool cuda_graphs_supported();

// A piece of work launched as a CUDA graph. The first `warmup_calls` calls of run() execute it as usual
// (libraries set themselves up on them: cuBLAS and cuDNN plans and workspaces, autograd's accumulators),
// the next one captures it and replays the capture, and every later call replays it. A capture that fails
// (the work did something a graph cannot hold) is said once on stderr, and the work runs as usual from
// then on: the failed capture executed nothing, so nothing ran twice. In a build without CUDA graphs
// run() always executes the work.
class CudaGraph {
 public:
  explicit CudaGraph(int warmup_calls = 3);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void run(const std::function<void()>& work);
  // Forgets the capture (the work's tensors were replaced, e.g. by a heal): the next calls warm up and
  // capture again.
  void reset();
  bool captured() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// While it lives, the calling thread's CUDA work goes to a stream of its own: graphs are captured on a
// stream other than the default one, and the warm-up calls must run on the stream the capture then uses.
// Entering and leaving wait for the device, so that what was queued before on the default stream is done
// before the side stream starts, and what the side stream queued is done when the default one goes on.
class CudaSideStream {
 public:
  CudaSideStream();
  ~CudaSideStream();
  CudaSideStream(const CudaSideStream&) = delete;
  CudaSideStream& operator=(const CudaSideStream&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loco
