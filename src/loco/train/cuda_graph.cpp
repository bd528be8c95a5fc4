#include "loco/train/cuda_graph.h"

#include <fmt/format.h>

#include <exception>

#include "loco/util/print_unchecked.h"

#if LOCO_CUDA_GRAPHS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#endif

namespace loco {

bool cuda_graphs_supported() { return LOCO_CUDA_GRAPHS != 0; }

struct CudaGraph::Impl {
  int warmup_calls;
  int calls = 0;
  bool failed = false;  // a capture failed: the work runs as usual from then on
#if LOCO_CUDA_GRAPHS
  std::unique_ptr<at::cuda::CUDAGraph> graph;
#endif
};

CudaGraph::CudaGraph(int warmup_calls) : impl_(std::make_unique<Impl>(Impl{warmup_calls})) {}

CudaGraph::~CudaGraph() = default;

bool CudaGraph::captured() const {
#if LOCO_CUDA_GRAPHS
  return impl_->graph != nullptr;
#else
  return false;
#endif
}

void CudaGraph::reset() {
#if LOCO_CUDA_GRAPHS
  impl_->graph.reset();
#endif
  impl_->calls = 0;
}

#if LOCO_CUDA_GRAPHS
namespace {

std::string message_of(const std::exception& e) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e)) return torch_error->what_without_backtrace();
  return e.what();
}

}  // namespace
#endif

void CudaGraph::run(const std::function<void()>& work) {
#if LOCO_CUDA_GRAPHS
  Impl& g = *impl_;
  if (g.graph) {
    g.graph->replay();
    return;
  }
  if (g.failed || g.calls < g.warmup_calls) {
    ++g.calls;
    work();
    return;
  }
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  try {
    // Thread-local capture: replicas that are threads of one process capture while others run as usual,
    // and their allocations must not invalidate this thread's capture (as the default global mode makes them).
    graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    try {
      work();
    } catch (...) {
      try {
        graph->capture_end();  // ends the stream's capture; fails as the capture did
      } catch (const std::exception&) {
      }
      throw;
    }
    graph->capture_end();
  } catch (const std::exception& e) {
    g.failed = true;
    loco::print_unchecked(stderr,
                          "loco: warning: a CUDA graph capture failed, so this part of the step runs kernel by kernel "
                          "(set train.cuda_graphs = false to skip the attempt): {}\n",
                          message_of(e));
    work();  // a failed capture executed none of the work
    return;
  }
  graph->replay();  // capturing executed nothing: this call's work runs now
  g.graph = std::move(graph);
#else
  work();
#endif
}

struct CudaSideStream::Impl {
#if LOCO_CUDA_GRAPHS
  explicit Impl(c10::cuda::CUDAStream stream) : guard(stream) {}
  c10::cuda::CUDAStreamGuard guard;
#endif
};

CudaSideStream::CudaSideStream() {
#if LOCO_CUDA_GRAPHS
  c10::cuda::device_synchronize();
  impl_ = std::make_unique<Impl>(c10::cuda::getStreamFromPool(/*isHighPriority=*/false));
#endif
}

CudaSideStream::~CudaSideStream() {
#if LOCO_CUDA_GRAPHS
  try {
    c10::cuda::device_synchronize();
  } catch (const std::exception&) {  // leaving after a CUDA error: the error was reported where it happened
  }
#endif
}

}  // namespace loco
