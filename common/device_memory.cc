#include "common/device_memory.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <torch/version.h>  // LibTorch 1.13 (Debian) and 2.x (CUDA builds).

#include "common/units.h"

namespace harmony::common {

struct DeviceMemory::State {
  std::string name;
  uint64_t capacity = 0;
  std::atomic<uint64_t> used{0};
  std::atomic<uint64_t> peak{0};
  std::atomic<uint64_t> allocations{0};  // Fresh from the base allocator.
  std::atomic<uint64_t> reused{0};       // Served from the cache.
  std::mutex peak_mu;
  std::string peak_activity;  // Guarded by peak_mu: what allocated at the peak.

  // Storages freed on this device, kept for reuse by size (as a GPU's
  // caching allocator keeps them): in use + cached <= capacity, so the
  // cache never causes an out-of-memory; it is trimmed when an allocation
  // needs the room.
  std::mutex cache_mu;
  std::map<uint64_t, std::vector<void*>> cache;  // Guarded by cache_mu.
  uint64_t cached = 0;                           // Guarded by cache_mu.
  c10::DeleterFnPtr free_block = nullptr;        // Guarded by cache_mu; set by Cache.

  ~State() {
    for (auto& [bytes, blocks] : cache) {
      for (void* p : blocks) free_block(p);
    }
  }

  // A cached storage of exactly `bytes`, or nullptr.
  void* TakeCached(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(cache_mu);
    auto it = cache.find(bytes);
    if (it == cache.end()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) cache.erase(it);
    cached -= bytes;
    return p;
  }

  // Frees cached storages, largest first, until in use + cached fits the
  // capacity (`used` already counts the allocation being made).
  void Trim() {
    std::vector<void*> out;
    c10::DeleterFnPtr free_fn = nullptr;
    {
      std::lock_guard<std::mutex> lock(cache_mu);
      free_fn = free_block;
      while (cached > 0 && used.load(std::memory_order_relaxed) + cached > capacity) {
        auto it = std::prev(cache.end());
        out.push_back(it->second.back());
        it->second.pop_back();
        cached -= it->first;
        if (it->second.empty()) cache.erase(it);
      }
    }
    for (void* p : out) free_fn(p);
  }

  void Cache(void* p, uint64_t bytes, c10::DeleterFnPtr free_fn) {
    std::lock_guard<std::mutex> lock(cache_mu);
    free_block = free_fn;
    cache[bytes].push_back(p);
    cached += bytes;
  }

  // Reserves `bytes` for `activity`; false (nothing reserved) when over
  // capacity.
  bool Reserve(uint64_t bytes, const std::string& activity) {
    uint64_t current = used.load(std::memory_order_relaxed);
    do {
      if (current + bytes > capacity) return false;
    } while (!used.compare_exchange_weak(current, current + bytes,
                                         std::memory_order_relaxed));
    const uint64_t now = current + bytes;
    uint64_t p = peak.load(std::memory_order_relaxed);
    while (now > p &&
           !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
    }
    if (now > p) {  // A new peak (rare once an iteration has run).
      std::lock_guard<std::mutex> lock(peak_mu);
      peak_activity = activity;
    }
    return true;
  }
  void Release(uint64_t bytes) {
    used.fetch_sub(bytes, std::memory_order_relaxed);
  }
};

DeviceMemory::DeviceMemory(std::string name, uint64_t capacity)
    : state_(std::make_shared<State>()) {
  state_->name = std::move(name);
  state_->capacity = capacity;
}

DeviceMemory::~DeviceMemory() = default;

const std::string& DeviceMemory::name() const { return state_->name; }
uint64_t DeviceMemory::capacity() const { return state_->capacity; }
uint64_t DeviceMemory::used() const { return state_->used.load(); }
uint64_t DeviceMemory::peak() const { return state_->peak.load(); }
uint64_t DeviceMemory::allocations() const { return state_->allocations.load(); }
uint64_t DeviceMemory::reused() const { return state_->reused.load(); }
void DeviceMemory::ResetPeak() {
  std::lock_guard<std::mutex> lock(state_->peak_mu);
  state_->peak.store(state_->used.load());
  state_->peak_activity.clear();
}
std::string DeviceMemory::peak_activity() const {
  std::lock_guard<std::mutex> lock(state_->peak_mu);
  return state_->peak_activity;
}

namespace {
thread_local DeviceMemoryScope* current_scope = nullptr;
}  // namespace

DeviceMemoryScope::DeviceMemoryScope(DeviceMemory* memory, std::string activity)
    : memory_(memory),
      activity_(std::make_shared<const std::string>(std::move(activity))),
      previous_(current_scope) {
  current_scope = this;
}

DeviceMemoryScope::~DeviceMemoryScope() { current_scope = previous_; }

// Wraps the CPU allocator; see the header. LibTorch's raw_allocate needs a
// storage's context to be its data pointer, so the accounting of each
// counted storage is kept in a table keyed by that pointer.
class AccountingAllocator final : public c10::Allocator {
 public:
  explicit AccountingAllocator(c10::Allocator* base)
      : base_(base), base_deleter_(base->raw_deleter()) {}

#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t bytes) override { return Allocate(bytes); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t bytes) const override { return Allocate(bytes); }
#endif

  c10::DataPtr Allocate(size_t bytes) const {
    DeviceMemoryScope* scope = current_scope;
    if (scope == nullptr || scope->memory_ == nullptr || base_deleter_ == nullptr) {
      return base_->allocate(bytes);
    }
    const std::shared_ptr<DeviceMemory::State>& state = scope->memory_->state();
    const std::string& activity = *scope->activity_;
    if (!state->Reserve(bytes, activity)) {
      TORCH_CHECK_WITH(
          OutOfMemoryError, false, "out of memory on device ", state->name,
          activity.empty() ? "" : " (", activity, activity.empty() ? "" : ")",
          ": allocating ", FormatBytes(bytes), " with ",
          FormatBytes(state->used.load()), " of ", FormatBytes(state->capacity),
          " in use", Holders(*state));
    }
    void* data = state->TakeCached(bytes);
    try {
      if (data != nullptr) {
        state->reused.fetch_add(1, std::memory_order_relaxed);
      } else {
        state->Trim();
        data = base_->raw_allocate(bytes);
        state->allocations.fetch_add(1, std::memory_order_relaxed);
      }
      std::lock_guard<std::mutex> lock(mu_);
      counted_.emplace(data, Entry{state, bytes, scope->activity_});
    } catch (...) {
      if (data != nullptr) base_deleter_(data);
      state->Release(bytes);
      throw;
    }
    return c10::DataPtr(data, data, &Delete, c10::Device(c10::DeviceType::CPU));
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return base_deleter_ == nullptr ? nullptr : &Delete;
  }

  static AccountingAllocator* instance;

 private:
  struct Entry {
    std::shared_ptr<DeviceMemory::State> state;
    uint64_t bytes;
    std::shared_ptr<const std::string> activity;  // Its scope's.
  };

  // "; held by task 12 (forward of vLayers 25-27): 3.70 MiB, ...": the
  // device's storages in use by the activity that allocated them, largest
  // first (at most 6, then the rest in one sum).
  std::string Holders(const DeviceMemory::State& state) const {
    std::map<std::string, uint64_t> by;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [data, e] : counted_) {
        if (e.state.get() != &state) continue;
        by[e.activity->empty() ? "unnamed" : *e.activity] += e.bytes;
      }
    }
    std::vector<std::pair<uint64_t, std::string>> order;
    for (const auto& [what, bytes] : by) order.emplace_back(bytes, what);
    std::sort(order.rbegin(), order.rend());
    std::string out;
    uint64_t rest = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      if (i >= 6) {
        rest += order[i].first;
        continue;
      }
      out += (i == 0 ? "; held by " : ", ") + order[i].second + ": " +
             FormatBytes(order[i].first);
    }
    if (rest > 0) out += ", " + std::to_string(order.size() - 6) + " more: " + FormatBytes(rest);
    return out;
  }

  // Frees a storage of this allocator (counted or not).
  static void Delete(void* data) {
    if (data == nullptr) return;
    AccountingAllocator* self = instance;
    std::shared_ptr<DeviceMemory::State> state;
    uint64_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(self->mu_);
      auto it = self->counted_.find(data);
      if (it != self->counted_.end()) {
        state = std::move(it->second.state);
        bytes = it->second.bytes;
        self->counted_.erase(it);
      }
    }
    if (!state) {
      self->base_deleter_(data);
      return;
    }
    state->Cache(data, bytes, self->base_deleter_);
    state->Release(bytes);
  }

  c10::Allocator* base_;
  c10::DeleterFnPtr base_deleter_;
  mutable std::mutex mu_;
  mutable std::unordered_map<void*, Entry> counted_;  // Guarded by mu_.
};

AccountingAllocator* AccountingAllocator::instance = nullptr;

void InstallDeviceMemoryAccounting() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Lives for the process, as LibTorch's allocator registry expects.
    AccountingAllocator::instance =
        new AccountingAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(AccountingAllocator::instance, /*priority=*/100);
  });
}

}  // namespace harmony::common
