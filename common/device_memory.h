// Memory accounting for virtual CPU devices (docs/DESIGN.md §6): tensors "on" a
// virtual device are ordinary CPU tensors whose bytes are counted against
// the device's capacity. Every CPU tensor storage allocated on a thread
// while a DeviceMemoryScope is active there is attributed to that scope's
// DeviceMemory and freed from it when the storage dies, whichever thread
// frees it. Going over the capacity throws c10::OutOfMemoryError (as a CUDA
// allocation would) naming the device, what was running and the bytes.
//
// The accounting is done by an allocator installed as LibTorch's CPU
// allocator (InstallDeviceMemoryAccounting); outside any scope it simply
// forwards to the allocator it replaced. Storages freed on a device are
// cached for reuse by size (see DeviceMemory::allocations). Allocations made by intra-op worker
// threads (rare scratch buffers) are not counted.
//
// Thread-safety: DeviceMemory is thread-safe. A DeviceMemoryScope is
// confined to the thread that made it and nests (the innermost wins).

#ifndef HARMONY_COMMON_DEVICE_MEMORY_H_
#define HARMONY_COMMON_DEVICE_MEMORY_H_

#include <cstdint>
#include <memory>
#include <string>

namespace harmony::common {

class DeviceMemory {
 public:
  // `name` as people see it ("cpu:1"); `capacity` in bytes.
  DeviceMemory(std::string name, uint64_t capacity);
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory();

  const std::string& name() const;
  uint64_t capacity() const;
  uint64_t used() const;
  // Highest `used` since construction or the last ResetPeak.
  uint64_t peak() const;
  // What was allocating when the peak was reached (a scope's activity; empty
  // if the peak has not grown since ResetPeak).
  std::string peak_activity() const;
  // Storages allocated so far from the process's allocator, and served
  // again from this device's cache of freed storages (one per storage,
  // however large). Freed storages are kept by size and reused for the
  // same size, as a GPU's caching allocator does; in use + cached stays
  // within the capacity (the cache is trimmed first), so caching never
  // causes an out-of-memory error, and used()/peak() count live bytes only.
  uint64_t allocations() const;
  uint64_t reused() const;
  void ResetPeak();

  // Shared with the storages allocated under it, so it may be destroyed
  // before them.
  struct State;
  const std::shared_ptr<State>& state() const { return state_; }

 private:
  std::shared_ptr<State> state_;
};

// Attributes this thread's allocations to `memory` (borrowed; nullptr
// stops counting) while alive. `activity` says what is running, for
// out-of-memory messages ("vLayer 3 backward, microbatch 16"), which also
// list what holds the device, by the activity that allocated it.
class DeviceMemoryScope {
 public:
  DeviceMemoryScope(DeviceMemory* memory, std::string activity = "");
  DeviceMemoryScope(const DeviceMemoryScope&) = delete;
  DeviceMemoryScope& operator=(const DeviceMemoryScope&) = delete;
  ~DeviceMemoryScope();

 private:
  friend class AccountingAllocator;
  DeviceMemory* memory_;
  std::shared_ptr<const std::string> activity_;  // Shared by its allocations.
  DeviceMemoryScope* previous_;
};

// Installs the accounting allocator in front of LibTorch's CPU allocator.
// Idempotent and thread-safe; call before creating scopes.
void InstallDeviceMemoryAccounting();

}  // namespace harmony::common

#endif  // HARMONY_COMMON_DEVICE_MEMORY_H_
