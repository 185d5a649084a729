// The profile's CUDA target (target.h): vLayers run on GPU 0 (a partition
// of it, or the whole GPU), memory read off LibTorch's caching allocator,
// bandwidths measured with pinned host buffers. Built only with HARMONY_CUDA
// (scripts/gpu/CMakeLists.txt), as executor/runtime/cuda_device.cc.

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "common/cuda_warm_up.h"
#include "common/torch_status.h"
#include "common/units.h"
#include "planner/profile/machine.h"
#include "planner/profile/target.h"

namespace harmony::planner {

namespace {

using c10::cuda::CUDAStream;
using common::FormatBytes;
using machine::Median;
using machine::Now;

// What the caching allocator has handed out on `gpu` (live tensors' blocks,
// not its cache), now and at its peak since the last resetPeakStats.
struct Allocated {
  int64_t current = 0, peak = 0;
};
Allocated ReadAllocated(c10::DeviceIndex gpu) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(gpu);
  const auto& all = stats.allocated_bytes[0];  // StatType::AGGREGATE.
  return {all.current, all.peak};
}

// A compute scope runs its backward on the calling thread, as the
// runtime's compute threads do (common/cuda_warm_up.h), so that a vLayer
// timed beside busy partitions meets their backward as it will in training.
class CudaScope : public Target::Scope {
 public:
  CudaScope(CUDAStream stream, bool compute) : guard_(stream) {
    if (compute) backward_here_.emplace();
  }

 private:
  c10::cuda::CUDAStreamGuard guard_;  // Sets the device too.
  std::optional<common::BackwardOnThisThread> backward_here_;
};

// One lane's streams (target.h).
struct Lane {
  CUDAStream compute, in, out;
};


class CudaTarget;

// Bytes allocated on the GPU since the meter was made (one meter measures
// at a time: the profiler's single runs; the pipelined ones are uncapped
// and read nothing).
class CudaMeter : public Target::Meter {
 public:
  CudaMeter(CudaTarget* target, c10::DeviceIndex gpu, uint64_t capacity)
      : target_(target), gpu_(gpu), capacity_(capacity),
        baseline_(ReadAllocated(gpu).current) {}
  uint64_t capacity() const override { return capacity_; }
  uint64_t used() const override { return Above(ReadAllocated(gpu_).current); }
  uint64_t peak() const override { return Above(ReadAllocated(gpu_).peak); }
  void ResetPeak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(gpu_); }
  absl::Status CheckPeak(const std::string& activity) const override {
    const uint64_t p = peak();
    if (p <= capacity_) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat(activity, " peaked at ", FormatBytes(p),
                                                     " of the partition's ",
                                                     FormatBytes(capacity_)));
  }
  std::unique_ptr<Target::Scope> Enter(int lane, Target::Role role, std::string) override;

 private:
  uint64_t Above(int64_t bytes) const {
    return bytes > baseline_ ? static_cast<uint64_t>(bytes - baseline_) : 0;
  }
  CudaTarget* const target_;
  const c10::DeviceIndex gpu_;
  const uint64_t capacity_;
  const int64_t baseline_;
};

class CudaTarget : public Target {
 public:
  // Lane i computes on GPU i % gpus, where the runtime puts device i
  // (partitions in turn, or whole GPUs); the single runs, on lane 0, on
  // GPU 0.
  CudaTarget(int gpus, int count, uint64_t capacity, std::string name)
      : gpus_(gpus), count_(count), capacity_(capacity), name_(std::move(name)) {}

  std::string kind() const override { return "cuda"; }
  std::string name() const override { return name_; }
  int count() const override { return count_; }
  uint64_t capacity() const override { return capacity_; }
  std::unique_ptr<Meter> NewMeter(uint64_t capacity) override {
    return std::make_unique<CudaMeter>(this, kFirst, capacity);
  }
  at::Tensor ToDevice(const at::Tensor& t) override {
    // To the GPU of the scope's stream (CUDAStreamGuard set it current).
    at::Tensor copy = t.detach().to(at::Device(at::kCUDA, c10::cuda::current_device()),
                                    /*non_blocking=*/false, /*copy=*/true);
    c10::cuda::getCurrentCUDAStream().synchronize();
    return copy;
  }
  at::Tensor ToHost(const at::Tensor& t) override {
    at::Tensor copy = t.detach().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
    c10::cuda::getCurrentCUDAStream().synchronize();
    return copy;
  }
  bool pins_host_memory() const override { return true; }
  void Synchronize() override { c10::cuda::getCurrentCUDAStream().synchronize(); }
  absl::StatusOr<proto::Bandwidths> MeasureBandwidths(int repeats) override;

  // Lane `lane`'s streams, made (and warmed up) at first use.
  Lane StreamsOf(int lane) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = lanes_.find(lane);
    if (it != lanes_.end()) return it->second;
    const auto gpu = static_cast<c10::DeviceIndex>(lane % gpus_);
    Lane l{c10::cuda::getStreamFromPool(false, gpu), c10::cuda::getStreamFromPool(false, gpu),
           c10::cuda::getStreamFromPool(false, gpu)};
    common::WarmUpCublas(l.compute);  // Before any meter's baseline.
    lanes_.emplace(lane, l);
    return l;
  }

 private:
  static constexpr c10::DeviceIndex kFirst = 0;
  const int gpus_;
  const int count_;
  const uint64_t capacity_;
  const std::string name_;
  std::mutex mu_;
  std::map<int, Lane> lanes_;  // Guarded by mu_.
};

std::unique_ptr<Target::Scope> CudaMeter::Enter(int lane, Target::Role role, std::string) {
  const Lane l = target_->StreamsOf(lane);
  const bool compute = role == Target::Role::kCompute;
  return std::make_unique<CudaScope>(compute                         ? l.compute
                                     : role == Target::Role::kCopyIn ? l.in
                                                                     : l.out,
                                     compute);
}

absl::StatusOr<proto::Bandwidths> CudaTarget::MeasureBandwidths(int repeats) {
  const int64_t elements =
      static_cast<int64_t>(std::min<uint64_t>(64ull << 20, capacity_ / 8) / 4);
  proto::Bandwidths bw;
  if (elements < 1024) return bw;
  const double bytes = static_cast<double>(elements) * 4;
  const int n = std::max(count_, 1);
  return common::CallTorch("measuring copy bandwidth on the GPU", [&] {
    const auto pinned = at::TensorOptions().dtype(at::kFloat).pinned_memory(true);
    auto on = [](const Lane& l) {
      return at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, l.in.device_index());
    };
    std::vector<at::Tensor> host, device;
    std::vector<Lane> lanes;
    for (int i = 0; i < n; ++i) {
      // pin_memory(), not .to(pinned): to() returns the pageable tensor
      // itself when only pinning differs (on an H100 that measured 7.9
      // GB/s to the device, pageable, against 54 GB/s pinned back).
      host.push_back(at::rand({elements}).pin_memory());
      lanes.push_back(StreamsOf(i));
      device.push_back(at::empty({elements}, on(lanes.back())));
    }
    at::Tensor back = at::empty({elements}, pinned);
    auto time = [&](const std::function<void()>& fn) {
      fn();
      std::vector<double> t;
      for (int r = 0; r < std::max(repeats, 3); ++r) {
        const double start = Now();
        fn();
        t.push_back(Now() - start);
      }
      return Median(t);
    };
    // Each copy queued on its lane's copy stream, then all waited for.
    auto h2d = [&](int i) {
      c10::cuda::CUDAStreamGuard g(lanes[i].in);
      device[i].copy_(host[i], /*non_blocking=*/true);
    };
    auto d2h = [&](int i, at::Tensor& to) {
      c10::cuda::CUDAStreamGuard g(lanes[i].out);
      to.copy_(device[i], /*non_blocking=*/true);
    };
    bw.set_host_to_device_bytes_per_s(bytes / time([&] {
      h2d(0);
      lanes[0].in.synchronize();
    }));
    bw.set_device_to_host_bytes_per_s(bytes / time([&] {
      d2h(0, back);
      lanes[0].out.synchronize();
    }));
    // Both directions at once (PCIe and NVLink-C2C are full duplex): the
    // rate of each while the other runs.
    if (n > 1) {
      bw.set_both_directions_bytes_per_s(bytes / time([&] {
        h2d(0);
        d2h(1, back);
        lanes[0].in.synchronize();
        lanes[1].out.synchronize();
      }));
    } else {
      at::Tensor other = at::empty({elements}, on(lanes[0]));
      bw.set_both_directions_bytes_per_s(bytes / time([&] {
        h2d(0);
        {
          c10::cuda::CUDAStreamGuard g(lanes[0].out);
          back.copy_(other, /*non_blocking=*/true);
        }
        lanes[0].in.synchronize();
        lanes[0].out.synchronize();
      }));
    }
    // Every lane's copy in at once: the link they share, per direction.
    bw.set_host_link_all_devices_bytes_per_s(bytes * n / time([&] {
      for (int i = 0; i < n; ++i) h2d(i);
      for (int i = 0; i < n; ++i) lanes[i].in.synchronize();
    }));
    if (n > 1) {
      bw.set_peer_bytes_per_s(bytes / time([&] {
        c10::cuda::CUDAStreamGuard g(lanes[1].in);
        device[1].copy_(device[0], /*non_blocking=*/true);
        lanes[1].in.synchronize();
      }));
    }
    // A transfer's fixed cost: the hand-off to the copy thread and back
    // (while the other devices compute), and a small copy's round trip
    // (launch, DMA set-up, the stream's synchronisation).
    at::Tensor small_host = at::empty({1024}, pinned);
    at::Tensor small = at::empty({1024}, on(lanes[0]));
    const double small_copy = time([&] {
      c10::cuda::CUDAStreamGuard g(lanes[0].in);
      small.copy_(small_host, /*non_blocking=*/true);
      lanes[0].in.synchronize();
    });
    const double handoff = MeasureHandoff(n - 1, 0, 200);
    bw.set_transfer_latency_s(handoff + small_copy);
    bw.set_sleep_overshoot_s(std::max(0.0, MeasureHandoff(n - 1, 1e-4, 200) - handoff));
    return bw;
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<Target>> CreateCudaTarget(const common::DeviceSpec& spec) {
  absl::StatusOr<absl::StatusOr<std::unique_ptr<Target>>> target = common::CallTorch(
      "the CUDA device to profile on",
      [&]() -> absl::StatusOr<std::unique_ptr<Target>> {
        const int gpus = static_cast<int>(c10::cuda::device_count());
        if (gpus == 0) {
          return absl::FailedPreconditionError(
              absl::StrCat(spec.ToString(), ": no CUDA device is visible to this process"));
        }
        const bool partitions = spec.capacity > 0;
        const int count = spec.count > 0 ? spec.count : gpus;
        if (!partitions && count > gpus) {
          return absl::FailedPreconditionError(
              absl::StrCat(spec.ToString(), " names ", count, " GPUs; this machine has ", gpus));
        }
        const c10::DeviceIndex gpu = 0;  // The vLayers are timed on the first.
        at::empty({1}, at::TensorOptions().device(at::kCUDA, gpu));  // Initialises CUDA.
        size_t free_bytes = 0, total_bytes = 0;
        cudaDeviceProp prop;
        {
          c10::cuda::CUDAGuard guard(gpu);
          C10_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
          C10_CUDA_CHECK(cudaGetDeviceProperties(&prop, gpu));
        }
        // Partitions go on the GPUs in turn (the runtime's CreateCudaDevices).
        const int on_first = (count + gpus - 1) / gpus;
        if (partitions && spec.capacity * static_cast<uint64_t>(on_first) > total_bytes) {
          return absl::FailedPreconditionError(absl::StrCat(
              spec.ToString(), ": ", on_first, " partitions of ", FormatBytes(spec.capacity),
              " on GPU 0 would hold ", FormatBytes(spec.capacity * on_first), "; it has ",
              FormatBytes(total_bytes)));
        }
        const uint64_t capacity = partitions ? spec.capacity : total_bytes;
        std::string name = prop.name;
        if (partitions) absl::StrAppend(&name, ", partitions of ", FormatBytes(capacity));
        auto made = std::make_unique<CudaTarget>(gpus, count, capacity, std::move(name));
        made->StreamsOf(0);
        return std::unique_ptr<Target>(std::move(made));
      },
      absl::StatusCode::kFailedPrecondition);
  if (!target.ok()) return target.status();
  return *std::move(target);
}

}  // namespace harmony::planner
