// CUDA devices behind the device seam (device.h), built only with
// HARMONY_CUDA (scripts/gpu-check.sh builds them on a GPU machine; the CPU
// build and CI never compile this file).
//
//   "cuda", "cuda:N"  one device per GPU (all, or the first N); its capacity
//                     is the GPU's memory;
//   "cuda:NxSIZE"     N partitions of SIZE bytes each, on the GPUs in turn
//                     (all on one GPU when it is alone): a machine with a
//                     single GPU still runs a plan for N devices.
//
// Each device has a compute stream and a copy stream per direction (weights
// and inputs in on one, outputs and gradients out on the other), taken from
// LibTorch's stream pool; work on them is ordered by stream synchronisation
// at hand-offs (Device::Sync, and every copy is done when ToDevice/ToHost
// return), never by a device-wide synchronisation. A tensor made on a copy
// stream and read on the compute stream is recorded on the compute stream
// (recordStream), so the caching allocator does not hand its memory out
// again before the compute stream has finished with it.
//
// Memory: what each device holds is read off the caching allocator's own
// trace (every allocation and completed free, with its bytes), attributed to
// the device whose Placement or ToDevice is active on the allocating thread,
// as the virtual CPU device's accounting does (the backward runs on the
// compute thread too: common/cuda_warm_up.h), or else to the device whose
// stream it is on (a backward that autograd's thread for the GPU ran, on the
// stream its forward ran on). used/peak/allocations/reused
// come from there (reused: served without a new cudaMalloc segment). A
// partition going over its cap fails the iteration with ResourceExhausted
// at the next ToDevice or Sync (the allocation itself cannot be refused from
// the trace), naming the device, what ran and the bytes. Not counted: the
// cuBLAS workspace of each compute stream (32 MiB with the deterministic
// workspace config), taken when a compute thread starts.
//
// Thread-safety: as Device.

#ifndef HARMONY_EXECUTOR_RUNTIME_CUDA_DEVICE_H_
#define HARMONY_EXECUTOR_RUNTIME_CUDA_DEVICE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device_spec.h"
#include "executor/runtime/device.h"

namespace harmony::executor {

// `count` devices of a CUDA `spec` (device.h's CreateDevices: the first
// `count`, or spec's devices `indices`). FailedPrecondition when there is no
// GPU, fewer GPUs than asked, or partitions larger than their GPU's share
// of its memory.
absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateCudaDevices(
    const common::DeviceSpec& spec, int count, const std::vector<int>& indices);

// Every device of a CUDA `spec`, as device.h's DescribeDevices.
absl::StatusOr<std::vector<DeviceInfo>> DescribeCudaDevices(const common::DeviceSpec& spec);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_CUDA_DEVICE_H_
