#include "executor/runtime/cuda_device.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "common/cuda_warm_up.h"
#include "common/status.h"
#include "common/units.h"

namespace harmony::executor {
namespace {

using common::FormatBytes;
using c10::cuda::CUDAStream;

// What the allocator's trace attributes to one device.
struct Account {
  Account(std::string n, uint64_t c) : name(std::move(n)), capacity(c) {}
  const std::string name;
  const uint64_t capacity;
  std::atomic<uint64_t> used{0}, peak{0}, allocations{0}, reused{0};
  // While a compute thread warms up: allocations on the device's streams
  // from threads it has no attribution on are not counted.
  std::atomic<bool> warming{false};
  std::mutex mu;
  bool over = false;  // Guarded by mu, with the three below.
  uint64_t over_bytes = 0, over_used = 0;
  std::string over_activity;

  // ResourceExhausted once an allocation took the device over its cap.
  absl::Status Check() {
    std::lock_guard<std::mutex> lock(mu);
    if (!over) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory on device ", name, over_activity.empty() ? "" : " (", over_activity,
        over_activity.empty() ? "" : ")", ": allocating ", FormatBytes(over_bytes), " took it to ",
        FormatBytes(over_used), " of its ", FormatBytes(capacity)));
  }
};

// The device a thread's allocations count against, while a placement or a
// copy to the device is active on it (nests).
struct Attribution {
  std::shared_ptr<Account> account;
  std::string activity;
  Attribution* previous = nullptr;
};
thread_local Attribution* current_attribution = nullptr;
// Set by a SEGMENT_ALLOC trace entry: the next allocation on this thread
// needed a new cudaMalloc.
thread_local bool segment_allocated = false;

class AttributionScope {
 public:
  AttributionScope(std::shared_ptr<Account> account, std::string activity) {
    a_.account = std::move(account);
    a_.activity = std::move(activity);
    a_.previous = current_attribution;
    current_attribution = &a_;
  }
  ~AttributionScope() { current_attribution = a_.previous; }
  AttributionScope(const AttributionScope&) = delete;
  AttributionScope& operator=(const AttributionScope&) = delete;

 private:
  Attribution a_;
};

// Live allocations by address, from the caching allocator's trace.
class Ledger {
 public:
  // Attaches to the allocator once (after CUDA is initialised, when the
  // allocator has its per-GPU parts).
  // Allocations on `stream` from a thread with no attribution (the
  // autograd engine's thread for the GPU, which runs the backward of
  // what ran on the stream) count against `account`.
  void Register(cudaStream_t stream, std::shared_ptr<Account> account) {
    std::lock_guard<std::mutex> lock(mu_);
    streams_[stream] = std::move(account);
  }

  static Ledger& Get() {
    static Ledger* ledger = [] {
      auto* l = new Ledger();
      c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(
          [l](const c10::CachingDeviceAllocator::TraceEntry& e) { l->OnTrace(e); });
      return l;
    }();
    return *ledger;
  }

 private:
  // Called by the allocator under its lock: no LibTorch calls here.
  void OnTrace(const c10::CachingDeviceAllocator::TraceEntry& e) {
    using Action = c10::CachingDeviceAllocator::TraceEntry::Action;
    if (e.action_ == Action::SEGMENT_ALLOC) {
      segment_allocated = true;
      return;
    }
    if (e.action_ == Action::ALLOC) {
      const bool fresh = segment_allocated;
      segment_allocated = false;
      Attribution* a = current_attribution;
      std::shared_ptr<Account> owner;
      if (a != nullptr) {
        owner = a->account;
      } else {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = streams_.find(static_cast<cudaStream_t>(e.stream_));
        if (it == streams_.end() || it->second->warming) return;
        owner = it->second;
      }
      Account& account = *owner;
      const uint64_t used = account.used += e.size_;
      uint64_t peak = account.peak.load();
      while (used > peak && !account.peak.compare_exchange_weak(peak, used)) {
      }
      // As the virtual CPU device counts them: new memory, or the cache's.
      if (fresh) {
        ++account.allocations;
      } else {
        ++account.reused;
      }
      if (used > account.capacity) {
        std::lock_guard<std::mutex> lock(account.mu);
        if (!account.over) {
          account.over = true;
          account.over_bytes = e.size_;
          account.over_used = used;
          account.over_activity = a != nullptr ? a->activity : "backward, on its compute stream";
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      live_[e.addr_] = {owner, e.size_};
      return;
    }
    if (e.action_ == Action::FREE_COMPLETED) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = live_.find(e.addr_);
      if (it == live_.end()) return;
      it->second.first->used -= it->second.second;
      live_.erase(it);
    }
  }

  std::mutex mu_;
  std::unordered_map<size_t, std::pair<std::shared_ptr<Account>, uint64_t>> live_;
  std::unordered_map<cudaStream_t, std::shared_ptr<Account>> streams_;
};

class CudaPlacement : public Placement {
 public:
  CudaPlacement(c10::DeviceIndex gpu, std::shared_ptr<Account> account, std::string activity)
      : guard_(gpu), scope_(std::move(account), std::move(activity)) {}

 private:
  c10::cuda::CUDAGuard guard_;
  AttributionScope scope_;
};

std::function<void()> UseStream(CUDAStream stream) {
  return [stream] {
    c10::cuda::set_device(stream.device_index());
    c10::cuda::setCurrentCUDAStream(stream);
  };
}

// The cuBLAS workspaces are taken when the compute thread starts, outside
// the device's accounting (common/cuda_warm_up.h): a partition's cap bounds
// what the plan holds, as the profile measured it.
using common::WarmUpCublas;

class CudaDevice : public Device {
 public:
  CudaDevice(int index, std::string name, c10::DeviceIndex gpu, uint64_t capacity,
             CUDAStream compute, CUDAStream in, CUDAStream out)
      : Device(index, name, UseStream(in), UseStream(out)),
        gpu_(gpu),
        compute_(compute),
        account_(std::make_shared<Account>(name, capacity)) {
    Ledger::Get().Register(compute.stream(), account_);
    Ledger::Get().Register(in.stream(), account_);
    Ledger::Get().Register(out.stream(), account_);
  }

  uint64_t capacity() const override { return account_->capacity; }
  uint64_t used() const override { return account_->used.load(); }
  uint64_t peak() const override { return account_->peak.load(); }
  void ResetPeak() override { account_->peak = account_->used.load(); }
  uint64_t allocations() const override { return account_->allocations.load(); }
  uint64_t reused() const override { return account_->reused.load(); }

  std::unique_ptr<Placement> Place(std::string activity) override {
    return std::make_unique<CudaPlacement>(gpu_, account_, std::move(activity));
  }

  c10::IValue ToDevice(const c10::IValue& v, std::string activity) override {
    if (!v.isTensor()) return v;
    return ToDeviceMany({v.toTensor()}, activity).front();
  }

  // Copies on the calling thread's current stream of this GPU (a copy
  // stream of this device, or the compute stream of a sender), from
  // tensors whose producer has finished with them (Sync before hand-offs);
  // issues them all, then waits once.
  std::vector<at::Tensor> ToDeviceMany(const std::vector<at::Tensor>& tensors,
                                       const std::string& activity) override {
    std::vector<at::Tensor> out;
    {
      c10::cuda::CUDAGuard guard(gpu_);
      AttributionScope scope(account_, activity);
      const CUDAStream stream = c10::cuda::getCurrentCUDAStream(gpu_);
      std::vector<c10::DeviceIndex> other_gpus;
      for (const at::Tensor& t : tensors) {
        const at::Tensor src = t.detach();
        if (src.is_cuda() && src.device().index() != gpu_) {
          other_gpus.push_back(src.device().index());
        }
        out.push_back(src.to(at::Device(at::kCUDA, gpu_), /*non_blocking=*/src.is_pinned(),
                             /*copy=*/true));
      }
      stream.synchronize();
      for (c10::DeviceIndex g : other_gpus) c10::cuda::getCurrentCUDAStream(g).synchronize();
      if (stream != compute_) {
        for (const at::Tensor& t : out) {
          c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), compute_);
        }
      }
    }
    const absl::Status over = account_->Check();
    TORCH_CHECK_WITH(OutOfMemoryError, over.ok(), std::string(over.message()));
    return out;
  }

  // One allocation and one copy of `flat` (pinned: issued without waiting
  // for the host), then views at each parameter's place in it; views that
  // are not `flat`'s are copied one by one.
  std::vector<at::Tensor> ToDeviceFlat(const at::Tensor& flat, const std::vector<at::Tensor>& views,
                                       const std::string& activity) override {
    for (const at::Tensor& v : views) {
      if (!v.is_alias_of(flat) || v.scalar_type() != flat.scalar_type()) {
        return ToDeviceMany(views, activity);
      }
    }
    const at::Tensor on_device = ToDeviceMany({flat}, activity).front();
    std::vector<at::Tensor> out;
    out.reserve(views.size());
    for (const at::Tensor& v : views) {
      out.push_back(on_device.as_strided(
          v.sizes(), v.strides(),
          on_device.storage_offset() + (v.storage_offset() - flat.storage_offset())));
    }
    return out;
  }

  // The compute thread runs its own backward (common/cuda_warm_up.h: not on
  // the GPU's one autograd thread, behind the other partitions'). A fresh
  // thread may get a cuBLAS handle of its own, with a workspace of its own
  // on the compute stream: taken now, outside the accounting.
  void StartCompute() override {
    static thread_local common::BackwardOnThisThread backward_here;
    UseStream(compute_)();
    account_->warming = true;
    WarmUpCublas(compute_);
    account_->warming = false;
  }

  absl::Status Sync() override {
    c10::cuda::getCurrentCUDAStream(gpu_).synchronize();
    return account_->Check();
  }

  at::Generator generator() override { return at::cuda::detail::getDefaultCUDAGenerator(gpu_); }

  bool wants_pinned_host() const override { return true; }
  c10::DeviceType type() const override { return c10::DeviceType::CUDA; }

 private:
  const c10::DeviceIndex gpu_;
  const CUDAStream compute_;
  const std::shared_ptr<Account> account_;
};

}  // namespace

absl::StatusOr<std::vector<DeviceInfo>> DescribeCudaDevices(const common::DeviceSpec& spec) {
  const int gpus = static_cast<int>(c10::cuda::device_count());
  if (gpus == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(spec.ToString(), ": no CUDA device is visible to this process"));
  }
  const bool partitions = spec.capacity > 0;
  const int available = partitions ? spec.count : (spec.count == 0 ? gpus : spec.count);
  if (!partitions && available > gpus) {
    return absl::FailedPreconditionError(
        absl::StrCat(spec.ToString(), " names ", available, " GPUs; this machine has ", gpus));
  }
  std::vector<DeviceInfo> out;
  std::vector<uint64_t> promised(gpus, 0);
  for (int d = 0; d < available; ++d) {
    const auto gpu = static_cast<c10::DeviceIndex>(d % gpus);
    size_t free_bytes = 0, total_bytes = 0;
    {
      c10::cuda::CUDAGuard guard(gpu);
      C10_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    }
    const uint64_t capacity = partitions ? spec.capacity : total_bytes;
    promised[gpu] += capacity;
    if (partitions && promised[gpu] > total_bytes) {
      return absl::FailedPreconditionError(absl::StrCat(
          spec.ToString(), ": partitions on GPU ", gpu, " would hold ",
          FormatBytes(promised[gpu]), "; it has ", FormatBytes(total_bytes)));
    }
    out.push_back({partitions ? absl::StrCat("cuda:", static_cast<int>(gpu), ".", d / gpus)
                              : absl::StrCat("cuda:", static_cast<int>(gpu)),
                   capacity});
  }
  return out;
}

absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateCudaDevices(
    const common::DeviceSpec& spec, int count, const std::vector<int>& indices) {
  HARMONY_ASSIGN_OR_RETURN(const std::vector<DeviceInfo> infos, DescribeCudaDevices(spec));
  const int available = static_cast<int>(infos.size());
  if (available < count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the plan needs ", count, " devices; ", spec.ToString(), " gives ", available,
        spec.capacity > 0 ? "" : " (cuda:NxSIZE makes N partitions of the GPUs)"));
  }
  const int gpus = static_cast<int>(c10::cuda::device_count());
  // Initialise CUDA (and the allocator's per-GPU parts) before attaching.
  at::empty({1}, at::TensorOptions().device(at::kCUDA, 0));
  Ledger::Get();
  std::vector<std::unique_ptr<Device>> devices;
  for (int k = 0; k < count; ++k) {
    const int d = indices.empty() ? k : indices[k];
    if (d < 0 || d >= available) {
      return absl::InternalError(absl::StrCat("device index ", d, " of ", spec.ToString(),
                                              ", which has ", available));
    }
    const auto gpu = static_cast<c10::DeviceIndex>(d % gpus);
    const CUDAStream compute = c10::cuda::getStreamFromPool(false, gpu);
    devices.push_back(std::make_unique<CudaDevice>(k, infos[d].name, gpu, infos[d].capacity,
                                                   compute,
                                                   c10::cuda::getStreamFromPool(false, gpu),
                                                   c10::cuda::getStreamFromPool(false, gpu)));
  }
  return devices;
}

}  // namespace harmony::executor
