#include "executor/runtime/device.h"

#include <utility>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "absl/strings/str_cat.h"
#include "common/device_memory.h"
#include "common/units.h"
#ifdef HARMONY_CUDA
#include "executor/runtime/cuda_device.h"
#endif

namespace harmony::executor {
namespace {

using common::DeviceMemory;
using common::DeviceMemoryScope;

class ScopedPlacement : public Placement {
 public:
  ScopedPlacement(DeviceMemory* memory, std::string activity)
      : scope_(memory, std::move(activity)) {}

 private:
  DeviceMemoryScope scope_;
};

c10::IValue Clone(const c10::IValue& v) {
  if (!v.isTensor()) return v;
  return v.toTensor().detach().clone();
}

class VirtualCpuDevice : public Device {
 public:
  VirtualCpuDevice(int index, uint64_t capacity)
      : Device(index, absl::StrCat("cpu:", index)), memory_(name(), capacity) {}

  uint64_t capacity() const override { return memory_.capacity(); }
  uint64_t used() const override { return memory_.used(); }
  uint64_t peak() const override { return memory_.peak(); }
  void ResetPeak() override { memory_.ResetPeak(); }
  std::string peak_activity() const override { return memory_.peak_activity(); }
  uint64_t allocations() const override { return memory_.allocations(); }
  uint64_t reused() const override { return memory_.reused(); }

  std::unique_ptr<Placement> Place(std::string activity) override {
    return std::make_unique<ScopedPlacement>(&memory_, std::move(activity));
  }

  c10::IValue ToDevice(const c10::IValue& v, std::string activity) override {
    DeviceMemoryScope scope(&memory_, std::move(activity));
    return Clone(v);
  }

  at::Generator generator() override { return at::detail::getDefaultCPUGenerator(); }

 private:
  DeviceMemory memory_;
};

}  // namespace

std::unique_ptr<Placement> PlaceOnHost() {
  return std::make_unique<ScopedPlacement>(nullptr, "");
}

c10::IValue ToHost(const c10::IValue& v) {
  DeviceMemoryScope none(nullptr);
  if (!v.isTensor() || v.toTensor().is_cpu()) return Clone(v);
  // From a GPU: into pinned memory, which the copy reaches at full speed.
  const at::Tensor src = v.toTensor().detach();
  at::Tensor out = at::empty(src.sizes(), src.options().device(at::kCPU).pinned_memory(true));
  out.copy_(src);
  return out;
}

std::unique_ptr<Device> CreateVirtualCpuDevice(int index, uint64_t capacity) {
  common::InstallDeviceMemoryAccounting();
  return std::make_unique<VirtualCpuDevice>(index, capacity);
}

absl::StatusOr<std::vector<DeviceInfo>> DescribeDevices(const common::DeviceSpec& spec) {
  if (spec.kind == common::DeviceSpec::Kind::kCuda) {
#ifdef HARMONY_CUDA
    return DescribeCudaDevices(spec);
#else
    return common::CudaBuildNeeded(spec, "runs on");
#endif
  }
  if (spec.count < 1 || spec.capacity == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no devices: ", spec.ToString(), " (virtual CPU devices need a count and a size, e.g. "
        "cpu:2x512MiB)"));
  }
  std::vector<DeviceInfo> out;
  for (int d = 0; d < spec.count; ++d) out.push_back({absl::StrCat("cpu:", d), spec.capacity});
  return out;
}

absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateDevices(
    const common::DeviceSpec& spec, int count, const std::vector<int>& indices) {
  if (!indices.empty() && static_cast<int>(indices.size()) != count) {
    return absl::InternalError(absl::StrCat("CreateDevices: ", indices.size(),
                                            " device indices for ", count, " devices"));
  }
  if (spec.kind == common::DeviceSpec::Kind::kCuda) {
#ifdef HARMONY_CUDA
    return CreateCudaDevices(spec, count, indices);
#else
    return common::CudaBuildNeeded(spec, "runs on");
#endif
  }
  if (spec.count < count) {
    return absl::FailedPreconditionError(absl::StrCat("the plan needs ", count, " devices; ",
                                                      spec.ToString(), " gives ", spec.count));
  }
  std::vector<std::unique_ptr<Device>> devices;
  for (int d = 0; d < count; ++d) devices.push_back(CreateVirtualCpuDevice(d, spec.capacity));
  return devices;
}

}  // namespace harmony::executor
