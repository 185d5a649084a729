#include "executor/runtime/device.h"

#include <utility>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "common/device_memory.h"

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
  uint64_t allocations() const override { return memory_.allocations(); }
  uint64_t reused() const override { return memory_.reused(); }

  std::unique_ptr<Placement> Place(std::string activity) override {
    return std::make_unique<ScopedPlacement>(&memory_, std::move(activity));
  }

  c10::IValue ToDevice(const c10::IValue& v, std::string activity) override {
    DeviceMemoryScope scope(&memory_, std::move(activity));
    return Clone(v);
  }

 private:
  DeviceMemory memory_;
};

}  // namespace

std::unique_ptr<Placement> PlaceOnHost() {
  return std::make_unique<ScopedPlacement>(nullptr, "");
}

c10::IValue ToHost(const c10::IValue& v) {
  DeviceMemoryScope none(nullptr);
  return Clone(v);
}

std::unique_ptr<Device> CreateVirtualCpuDevice(int index, uint64_t capacity) {
  common::InstallDeviceMemoryAccounting();
  return std::make_unique<VirtualCpuDevice>(index, capacity);
}

}  // namespace harmony::executor
