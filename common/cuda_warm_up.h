// cuBLAS keeps a workspace per handle (one per thread) and stream (32 MiB
// with the deterministic CUBLAS_WORKSPACE_CONFIG=:4096:8), taken from the
// caching allocator at the pair's first matrix product and never given
// back. WarmUpCublas takes it for the calling thread on `stream` (and, for a
// thread whose backward still goes to the autograd engine's thread of the
// GPU, for that thread too), so that memory counted afterwards (a
// partition's accounting, the profiler's meter) is the model's only.
//
// BackwardOnThisThread: LibTorch's engine runs every GPU's backward on one
// thread per GPU, shared by every caller; partitions of one GPU (cuda:NxSIZE)
// then queue their backward behind each other's on it while their forwards
// run side by side (the H100 replay: a vLayer's forward took 1.71x its time
// alone beside 3 busy partitions, its backward 1.04x, and the partitions'
// summed compute 1.42x the plan's). Turning autograd's multithreading off for
// the calling thread (c10::AutogradState, LibTorch 2.0 on) runs its backward
// on itself, on the streams its forward ran on, as a CPU device's does.
// Built only with HARMONY_CUDA (scripts/gpu/CMakeLists.txt).
//
// Thread-safety: call from the thread to warm up or to change; returns when
// done. BackwardOnThisThread changes the calling thread's state only.

#ifndef HARMONY_COMMON_CUDA_WARM_UP_H_
#define HARMONY_COMMON_CUDA_WARM_UP_H_

#include <c10/cuda/CUDAStream.h>

namespace harmony::common {

void WarmUpCublas(c10::cuda::CUDAStream stream);

// While one lives, the calling thread's backward runs on it; the thread's
// previous setting comes back when it goes.
class BackwardOnThisThread {
 public:
  BackwardOnThisThread();
  ~BackwardOnThisThread();
  BackwardOnThisThread(const BackwardOnThisThread&) = delete;
  BackwardOnThisThread& operator=(const BackwardOnThisThread&) = delete;

 private:
  const bool was_multithreaded_;
};

}  // namespace harmony::common

#endif  // HARMONY_COMMON_CUDA_WARM_UP_H_
