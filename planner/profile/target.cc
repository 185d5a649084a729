#include "planner/profile/target.h"

#include <optional>
#include <utility>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "common/device_memory.h"
#include "common/units.h"
#include "planner/profile/machine.h"

namespace harmony::planner {

namespace {

using common::DeviceMemory;
using common::DeviceMemoryScope;

class CpuScope : public Target::Scope {
 public:
  CpuScope(DeviceMemory* memory, std::string activity) : scope_(memory, std::move(activity)) {}

 private:
  DeviceMemoryScope scope_;
};

// A virtual CPU device's accounting (common/device_memory.h): an allocation
// over the capacity throws, so a peak is never over it.
class CpuMeter : public Target::Meter {
 public:
  explicit CpuMeter(uint64_t capacity) : memory_("cpu:0", capacity) {}
  uint64_t capacity() const override { return memory_.capacity(); }
  uint64_t used() const override { return memory_.used(); }
  uint64_t peak() const override { return memory_.peak(); }
  void ResetPeak() override { memory_.ResetPeak(); }
  absl::Status CheckPeak(const std::string& activity) const override {
    if (memory_.peak() <= memory_.capacity()) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat(
        activity, " peaked at ", common::FormatBytes(memory_.peak()), " of the device's ",
        common::FormatBytes(memory_.capacity())));
  }
  std::unique_ptr<Target::Scope> Enter(int, Target::Role, std::string activity) override {
    return std::make_unique<CpuScope>(&memory_, std::move(activity));
  }

 private:
  DeviceMemory memory_;
};

class CpuTarget : public Target {
 public:
  explicit CpuTarget(const common::DeviceSpec& spec) : spec_(spec) {
    common::InstallDeviceMemoryAccounting();
  }
  std::string kind() const override { return "cpu"; }
  std::string name() const override { return "virtual CPU device"; }
  int count() const override { return spec_.count; }
  uint64_t capacity() const override { return spec_.capacity; }
  std::unique_ptr<Meter> NewMeter(uint64_t capacity) override {
    return std::make_unique<CpuMeter>(capacity);
  }
  // A copy in memory another thread wrote, as the runtime's devices read
  // their weights.
  at::Tensor ToDevice(const at::Tensor& t) override { return t.detach().clone(); }
  at::Tensor ToHost(const at::Tensor& t) override { return t.detach().clone(); }
  void Synchronize() override {}
  absl::StatusOr<proto::Bandwidths> MeasureBandwidths(int repeats) override {
    return planner::MeasureBandwidths(spec_, repeats);
  }

 private:
  const common::DeviceSpec spec_;
};

}  // namespace

std::unique_ptr<Target> CreateCpuTarget(const common::DeviceSpec& spec) {
  return std::make_unique<CpuTarget>(spec);
}

absl::StatusOr<std::unique_ptr<Target>> CreateTarget(const common::DeviceSpec& spec) {
  if (spec.kind == common::DeviceSpec::Kind::kCuda) {
#ifdef HARMONY_CUDA
    return CreateCudaTarget(spec);
#else
    return common::CudaBuildNeeded(spec, "profiles");
#endif
  }
  if (spec.capacity == 0 || spec.count < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "devices need a count and a size (cpu:NxSIZE, e.g. cpu:2x512MiB); got ",
        spec.ToString()));
  }
  return CreateCpuTarget(spec);
}

}  // namespace harmony::planner
