// cuBLAS keeps a workspace per handle (one per thread) and stream (32 MiB
// with the deterministic CUBLAS_WORKSPACE_CONFIG=:4096:8), taken from the
// caching allocator at the pair's first matrix product and never given
// back. WarmUpCublas takes it for the calling thread on `stream`, and for
// the autograd engine's thread of the GPU (the backward's products run
// there, with a handle of its own), so that memory counted afterwards (a
// partition's accounting, the profiler's meter) is the model's only.
// Built only with HARMONY_CUDA (scripts/gpu/CMakeLists.txt).
//
// Thread-safety: call from the thread to warm up; returns when done.

#ifndef HARMONY_COMMON_CUDA_WARM_UP_H_
#define HARMONY_COMMON_CUDA_WARM_UP_H_

#include <c10/cuda/CUDAStream.h>

namespace harmony::common {

void WarmUpCublas(c10::cuda::CUDAStream stream);

}  // namespace harmony::common

#endif  // HARMONY_COMMON_CUDA_WARM_UP_H_
