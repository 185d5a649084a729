// The device a profile is measured on (the profiler's measurement source):
// virtual CPU devices (target.cc), or a CUDA GPU or partitions of one
// (cuda_target.cc, compiled only with HARMONY_CUDA, as the runtime's CUDA
// device; scripts/gpu-check.sh builds it). The profiler runs each vLayer on
// copies the target makes, times it, and reads the target's memory meter;
// nothing else of it knows which device it measures.
//
// Streams (CUDA): each lane (one per device the plan will have, the
// profiler's neighbours included) computes on a stream of its own and copies
// on two more (in and out), lane i on GPU i % (the GPUs) as the runtime
// places device i, so that lanes run side by side as the runtime's devices
// do (partitions of one GPU share it). Single runs and meters are lane 0's,
// on GPU 0. ToDevice and ToHost return when the copy is
// done; Synchronize waits for what the calling thread queued on its current
// stream (a lane's compute stream inside its compute scope). A tensor made
// on a copy stream is read on the compute stream only after the copy
// returned, and freed only after the compute stream was synchronised
// (vlayer_timing.cc times every run up to a Synchronize), so the caching
// allocator never hands its memory out early.
//
// Thread-safety: a Target is thread-safe. A Meter is thread-safe; a Scope
// is confined to the thread that made it.

#ifndef HARMONY_PLANNER_PROFILE_TARGET_H_
#define HARMONY_PLANNER_PROFILE_TARGET_H_

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device_spec.h"
#include "proto/plan.pb.h"

namespace harmony::planner {

class Target {
 public:
  // What a lane's thread is doing inside a scope: which stream it runs on.
  enum class Role { kCompute, kCopyIn, kCopyOut };

  // While alive, the calling thread's allocations on the device count
  // against its meter and its work goes to the lane's stream for its role.
  class Scope {
   public:
    virtual ~Scope() = default;
  };

  // What one device holds: bytes in use and their peak, of what was
  // allocated inside its scopes.
  class Meter {
   public:
    virtual ~Meter() = default;
    virtual uint64_t capacity() const = 0;
    virtual uint64_t used() const = 0;
    virtual uint64_t peak() const = 0;  // Since construction or ResetPeak.
    virtual void ResetPeak() = 0;
    // ResourceExhausted, naming the device, `activity` and the bytes, when
    // the peak went over the capacity (a GPU partition's cap cannot refuse
    // the allocation itself; a virtual CPU device's refuses it at once,
    // as an out-of-memory error of the run).
    virtual absl::Status CheckPeak(const std::string& activity) const = 0;
    virtual std::unique_ptr<Scope> Enter(int lane, Role role, std::string activity) = 0;
  };

  virtual ~Target() = default;

  // The proto's device_kind ("cpu", "cuda") and device_name ("virtual CPU
  // device", "NVIDIA H200, partitions of 11.00 GiB").
  virtual std::string kind() const = 0;
  virtual std::string name() const = 0;
  // Devices the plan will have, and the bytes of each.
  virtual int count() const = 0;
  virtual uint64_t capacity() const = 0;

  // A fresh meter for one device of `capacity` bytes.
  virtual std::unique_ptr<Meter> NewMeter(uint64_t capacity) = 0;
  // A copy of `t` on the device (inside a scope: counted, on the scope's
  // stream and its GPU), done when it returns.
  virtual at::Tensor ToDevice(const at::Tensor& t) = 0;
  // A host copy of the device tensor `t`, done when it returns.
  virtual at::Tensor ToHost(const at::Tensor& t) = 0;
  // Whether host tensors copied to the device should be in pinned memory
  // (a GPU's: the runtime's host store is pinned for it).
  virtual bool pins_host_memory() const { return false; }
  // Waits until the work the calling thread queued is done (nothing to
  // wait for on a virtual CPU device: its work is done when the call
  // returns).
  virtual void Synchronize() = 0;

  // Host<->device copy bandwidths (one device each way, all devices at
  // once, both directions at once, device to device) and a transfer's
  // fixed cost, median of `repeats`.
  virtual absl::StatusOr<proto::Bandwidths> MeasureBandwidths(int repeats) = 0;
};

// The target for `spec`: virtual CPU devices, or CUDA in a build with it.
// InvalidArgument for a spec without a count or a size where one is needed;
// FailedPrecondition for CUDA in a build without it, no GPU, or partitions
// larger than the GPU.
absl::StatusOr<std::unique_ptr<Target>> CreateTarget(const common::DeviceSpec& spec);

// Virtual CPU devices of spec.capacity bytes each (target.cc).
std::unique_ptr<Target> CreateCpuTarget(const common::DeviceSpec& spec);

#ifdef HARMONY_CUDA
// cuda_target.cc.
absl::StatusOr<std::unique_ptr<Target>> CreateCudaTarget(const common::DeviceSpec& spec);
#endif

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_PROFILE_TARGET_H_
