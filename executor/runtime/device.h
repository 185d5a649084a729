// A device the runtime trains on (docs/DESIGN.md §6): its memory, where the
// tensors a thread makes are placed, and the streams beside its compute.
//
// Residency and stream contract:
//   - The runtime computes on a device from one thread of its own. Tensors
//     made on a thread while a Placement of the device is alive there are
//     on the device and count against its capacity until they are freed,
//     whichever thread frees them; going over the capacity fails the
//     allocation with c10::OutOfMemoryError naming the device, the activity
//     and the bytes (the runtime turns it into ResourceExhausted).
//   - Beside the compute thread, three streams (stream.h): weights() swaps
//     weights in, copy_in() copies inputs from the host, copy_out() copies
//     outputs and gradients to the host. Each runs its work in the order it
//     was posted. Whoever posts work keeps what it reads alive until it has
//     run (the runtime's closures capture the tensors they copy).
//   - ToDevice / ToHost copy on the calling thread (on a stream's thread
//     for swaps) and return when the copy is done; a tensor handed to
//     another device is copied by the sender under the receiver's Placement.
//   - The compute thread calls StartCompute first. Work it issues may still
//     be running on the device when the call returns (a CUDA stream), so
//     before it hands tensors it made to another thread (a send, a copy-out,
//     a reduction) it calls Sync.
//
// Two implementations: the virtual CPU device, where "device" tensors are
// CPU tensors counted by common/device_memory.h and work is done when it is
// issued; and, in a CUDA build, the CUDA device (cuda_device.h): a GPU or a
// partition of one, with a compute stream and a copy stream per direction.
//
// Thread-safety: thread-safe.

#ifndef HARMONY_EXECUTOR_RUNTIME_DEVICE_H_
#define HARMONY_EXECUTOR_RUNTIME_DEVICE_H_

#include <cstdint>
#include <memory>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/ivalue.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device_spec.h"
#include "executor/runtime/stream.h"

namespace harmony::executor {

// While alive on the thread that made it, tensors made there are placed on
// its device (or the host). Nests; the innermost wins. Confined to its thread.
class Placement {
 public:
  virtual ~Placement() = default;
};

class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const { return name_; }  // "cpu:1"
  int index() const { return index_; }

  // Bytes: the capacity, in use now, the highest in use since the last
  // ResetPeak. Storages the device allocated anew and served from its cache
  // of freed ones (a caching allocator's hit rate).
  virtual uint64_t capacity() const = 0;
  virtual uint64_t used() const = 0;
  virtual uint64_t peak() const = 0;
  virtual void ResetPeak() = 0;
  // What was allocating when the peak was reached ("" if unknown).
  virtual std::string peak_activity() const { return ""; }
  virtual uint64_t allocations() const = 0;
  virtual uint64_t reused() const = 0;

  // Places the calling thread's new tensors on this device while alive;
  // `activity` says what runs, for out-of-memory errors.
  virtual std::unique_ptr<Placement> Place(std::string activity) = 0;
  // A copy of `v` on this device (a non-tensor is returned as is), made on
  // the calling thread.
  virtual c10::IValue ToDevice(const c10::IValue& v, std::string activity) = 0;
  // Copies of `tensors` on this device, made on the calling thread: a CUDA
  // device issues them all and waits once (a weight swap's vLayer).
  virtual std::vector<at::Tensor> ToDeviceMany(const std::vector<at::Tensor>& tensors,
                                               const std::string& activity) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : tensors) out.push_back(ToDevice(t, activity).toTensor());
    return out;
  }

  // Copies of `views` (tensors whose storage is `flat`'s: a vLayer's
  // parameters in the host store's flat buffer) on this device, made on
  // the calling thread. A CUDA device makes one allocation and one copy of
  // `flat` and returns views of it (a weight swap at the link's full
  // speed, nothing allocated per parameter); the virtual CPU device copies
  // each view (ToDeviceMany), as before.
  virtual std::vector<at::Tensor> ToDeviceFlat(const at::Tensor& flat,
                                               const std::vector<at::Tensor>& views,
                                               const std::string& activity) {
    return ToDeviceMany(views, activity);
  }
  // On the compute thread, before it computes (a CUDA device makes its
  // compute stream the thread's current stream).
  virtual void StartCompute() {}
  // Waits until the work the calling thread issued on this device is done.
  // ResourceExhausted, naming the device, what ran and the bytes, when the
  // device went over its capacity (a CUDA partition's cap is checked here
  // and in ToDevice; a virtual CPU device fails the allocation itself).
  virtual absl::Status Sync() { return absl::OkStatus(); }
  // The generator of the device's random kernels (dropout).
  virtual at::Generator generator() = 0;
  // Whether host tensors that cross to this device should be in pinned
  // memory (copies from it overlap compute).
  virtual bool wants_pinned_host() const { return false; }
  // Where its tensors live: the autocast a bf16 plan computes under
  // (common/autocast.h).
  virtual c10::DeviceType type() const { return c10::DeviceType::CPU; }

  Stream& weights() { return weights_; }
  Stream& copy_in() { return copy_in_; }
  Stream& copy_out() { return copy_out_; }

 protected:
  // `to_device` and `to_host` run first on the threads of the streams that
  // copy that way (thread-local settings: a CUDA device's copy streams).
  Device(int index, std::string name, std::function<void()> to_device = nullptr,
         std::function<void()> to_host = nullptr)
      : index_(index),
        name_(std::move(name)),
        weights_(to_device),
        copy_in_(to_device),
        copy_out_(to_host) {}

 private:
  const int index_;
  const std::string name_;
  Stream weights_, copy_in_, copy_out_;
};

// Places the calling thread's new tensors in host memory while alive.
std::unique_ptr<Placement> PlaceOnHost();

// A copy of `v` in host memory, made on the calling thread (on its current
// stream for a CUDA tensor), done when this returns.
c10::IValue ToHost(const c10::IValue& v);

// Virtual CPU device `index` ("cpu:<index>") of `capacity` bytes. Installs
// the memory accounting (common/device_memory.h) on first use.
std::unique_ptr<Device> CreateVirtualCpuDevice(int index, uint64_t capacity);

// `count` devices of `spec`: the first `count`, or with `indices` (count
// of them) those of spec's devices (a daemon's job on the server devices it
// was given: on CUDA they say which GPU each partition is on).
// FailedPrecondition when it has fewer, or names CUDA devices in a build
// without CUDA.
absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateDevices(
    const common::DeviceSpec& spec, int count, const std::vector<int>& indices = {});

// What `spec` gives, device by device, without making them: each one's name
// as CreateDevices names it and its bytes (a whole GPU's memory for "cuda").
// FailedPrecondition as CreateDevices; InvalidArgument for a CPU spec
// without a count or a size.
struct DeviceInfo {
  std::string name;
  uint64_t capacity = 0;
};
absl::StatusOr<std::vector<DeviceInfo>> DescribeDevices(const common::DeviceSpec& spec);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_DEVICE_H_
