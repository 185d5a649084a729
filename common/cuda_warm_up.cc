#include "common/cuda_warm_up.h"

#include <ATen/ATen.h>
#include <c10/core/AutogradState.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDAGuard.h>

namespace harmony::common {

void WarmUpCublas(c10::cuda::CUDAStream stream) {
  c10::cuda::CUDAStreamGuard guard(stream);
  const auto o = at::TensorOptions().device(at::kCUDA, stream.device_index());
  c10::AutoGradMode grad(true);
  at::Tensor x = at::ones({16, 16}, o).requires_grad_(true);
  at::Tensor w = at::ones({16, 16}, o).requires_grad_(true);
  at::Tensor b = at::ones({16}, o).requires_grad_(true);
  at::Tensor y = at::linear(x, w, b);
  at::bmm(y.unsqueeze(0), y.unsqueeze(0)).sum().backward();
  stream.synchronize();
}

BackwardOnThisThread::BackwardOnThisThread()
    : was_multithreaded_(c10::AutogradState::get_tls_state().get_multithreading_enabled()) {
  c10::AutogradState::get_tls_state().set_multithreading_enabled(false);
}

BackwardOnThisThread::~BackwardOnThisThread() {
  c10::AutogradState::get_tls_state().set_multithreading_enabled(was_multithreaded_);
}

}  // namespace harmony::common
