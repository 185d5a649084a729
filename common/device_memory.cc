#include "common/device_memory.h"

#include <atomic>
#include <mutex>
#include <utility>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include "common/units.h"

namespace harmony::common {

struct DeviceMemory::State {
  std::string name;
  uint64_t capacity = 0;
  std::atomic<uint64_t> used{0};
  std::atomic<uint64_t> peak{0};

  // Reserves `bytes`; false (nothing reserved) when over capacity.
  bool Reserve(uint64_t bytes) {
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
void DeviceMemory::ResetPeak() { state_->peak.store(state_->used.load()); }

namespace {
thread_local DeviceMemoryScope* current_scope = nullptr;
}  // namespace

DeviceMemoryScope::DeviceMemoryScope(DeviceMemory* memory, std::string activity)
    : memory_(memory), activity_(std::move(activity)), previous_(current_scope) {
  current_scope = this;
}

DeviceMemoryScope::~DeviceMemoryScope() { current_scope = previous_; }

// Wraps the CPU allocator; see the header.
class AccountingAllocator final : public c10::Allocator {
 public:
  explicit AccountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t bytes) const override {
    DeviceMemoryScope* scope = current_scope;
    if (scope == nullptr || scope->memory_ == nullptr) {
      return base_->allocate(bytes);
    }
    const std::shared_ptr<DeviceMemory::State>& state = scope->memory_->state();
    if (!state->Reserve(bytes)) {
      TORCH_CHECK_WITH(
          OutOfMemoryError, false, "out of memory on device ", state->name,
          scope->activity_.empty() ? "" : " (",
          scope->activity_, scope->activity_.empty() ? "" : ")",
          ": allocating ", FormatBytes(bytes), " with ",
          FormatBytes(state->used.load()), " of ", FormatBytes(state->capacity),
          " in use");
    }
    c10::DataPtr inner;
    try {
      inner = base_->allocate(bytes);
    } catch (...) {
      state->Release(bytes);
      throw;
    }
    void* data = inner.get();
    auto* context = new Context{std::move(inner), state, bytes};
    return c10::DataPtr(data, context, &Delete,
                        c10::Device(c10::DeviceType::CPU));
  }

  // Uncounted raw allocations go to the base allocator.
  c10::DeleterFnPtr raw_deleter() const override {
    return base_->raw_deleter();
  }

 private:
  struct Context {
    c10::DataPtr inner;
    std::shared_ptr<DeviceMemory::State> state;
    uint64_t bytes;
  };
  static void Delete(void* p) {
    auto* context = static_cast<Context*>(p);
    context->state->Release(context->bytes);
    delete context;  // Frees the storage through the base allocator.
  }

  c10::Allocator* base_;
};

void InstallDeviceMemoryAccounting() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Lives for the process, as LibTorch's allocator registry expects.
    static AccountingAllocator* allocator =
        new AccountingAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(allocator, /*priority=*/100);
  });
}

}  // namespace harmony::common
