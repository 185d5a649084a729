// LibTorch's autocast to bf16 on the calling thread while alive, for the
// CPU or for CUDA devices (a bf16 plan, common/precision.h): matrix
// products and convolutions in bf16, reductions, norms, softmax and losses
// in fp32, as torch.autocast(device, dtype=torch.bfloat16) runs them. Off:
// does nothing. Confined to its thread.

#ifndef HARMONY_COMMON_AUTOCAST_H_
#define HARMONY_COMMON_AUTOCAST_H_

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceType.h>
#include <torch/version.h>

// LibTorch 2.4 took the device type as an argument (the per-device calls
// of 1.13, Debian's, were deprecated, then removed).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define HARMONY_AUTOCAST_BY_DEVICE_TYPE 1
#endif

namespace harmony::common {

class Autocast {
 public:
  explicit Autocast(bool on, c10::DeviceType device = c10::DeviceType::CPU)
      : on_(on), device_(device) {
    if (!on_) return;
    was_enabled_ = Enabled();
    was_dtype_ = Dtype();
    Set(true, at::kBFloat16);
  }
  ~Autocast() {
    if (!on_) return;
    Set(was_enabled_, was_dtype_);
    // Casts cached for the region (of fp32 leaves) are not kept past it.
    at::autocast::clear_cache();
  }
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
#ifdef HARMONY_AUTOCAST_BY_DEVICE_TYPE
  bool Enabled() const { return at::autocast::is_autocast_enabled(device_); }
  at::ScalarType Dtype() const { return at::autocast::get_autocast_dtype(device_); }
  void Set(bool enabled, at::ScalarType dtype) const {
    at::autocast::set_autocast_dtype(device_, dtype);
    at::autocast::set_autocast_enabled(device_, enabled);
  }
#else
  bool cuda() const { return device_ == c10::DeviceType::CUDA; }
  bool Enabled() const {
    return cuda() ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
  }
  at::ScalarType Dtype() const {
    return cuda() ? at::autocast::get_autocast_gpu_dtype()
                  : at::autocast::get_autocast_cpu_dtype();
  }
  void Set(bool enabled, at::ScalarType dtype) const {
    if (cuda()) {
      at::autocast::set_autocast_gpu_dtype(dtype);
      at::autocast::set_enabled(enabled);
    } else {
      at::autocast::set_autocast_cpu_dtype(dtype);
      at::autocast::set_cpu_enabled(enabled);
    }
  }
#endif

  const bool on_;
  const c10::DeviceType device_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kBFloat16;
};

}  // namespace harmony::common

#endif  // HARMONY_COMMON_AUTOCAST_H_
