// LibTorch's CPU autocast to bf16 on the calling thread while alive
// (executor/runtime/runtime.h RuntimeOptions::bf16): matrix products and
// convolutions in bf16, reductions, norms, softmax and losses in fp32, as
// torch.autocast("cpu", dtype=torch.bfloat16) runs them. Off: does nothing.
// Confined to its thread.

#ifndef HARMONY_COMMON_AUTOCAST_H_
#define HARMONY_COMMON_AUTOCAST_H_

#include <ATen/autocast_mode.h>

namespace harmony::common {

class Autocast {
 public:
  explicit Autocast(bool on) : on_(on) {
    if (!on_) return;
    was_enabled_ = at::autocast::is_cpu_enabled();
    was_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  }
  ~Autocast() {
    if (!on_) return;
    at::autocast::set_cpu_enabled(was_enabled_);
    at::autocast::set_autocast_cpu_dtype(was_dtype_);
    // Casts cached for the region (of fp32 leaves) are not kept past it.
    at::autocast::clear_cache();
  }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  const bool on_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

}  // namespace harmony::common

#endif  // HARMONY_COMMON_AUTOCAST_H_
