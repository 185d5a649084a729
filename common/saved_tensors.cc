#include "common/saved_tensors.h"

#include <mutex>
#include <utility>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>

namespace harmony::common {

// One saved tensor: where its bytes are and how it views them.
struct SavedTensors::Slot {
  bool undefined = false;
  at::Tensor held;   // Kept as is (no storage to move: sparse, opaque).
  int weight = -1;   // Resolved to SetWeights' tensor at this position.
  int entry = -1;    // Else: entries_[entry]'s storage.
  int64_t offset = 0;  // Relative to the storage (weights: to the weight's own offset).
  std::vector<int64_t> sizes, strides;
  at::ScalarType dtype = at::kFloat;
};

namespace {

thread_local std::shared_ptr<SavedTensors> tls_saving;

class Hook : public torch::autograd::SavedVariableHooks {
 public:
  explicit Hook(std::shared_ptr<SavedTensors> saved) : saved_(std::move(saved)) {}
  void call_pack_hook(const at::Tensor& tensor) override { slot_ = saved_->Pack(tensor); }
  at::Tensor call_unpack_hook() override {
    TORCH_CHECK(slot_ != nullptr, "a kept tensor was unpacked before it was packed");
    return saved_->Unpack(*slot_);
  }

 private:
  std::shared_ptr<SavedTensors> saved_;
  std::shared_ptr<SavedTensors::Slot> slot_;
};

// LibTorch's engine, with default saved-variable hooks from this thread's
// SaveInto (none outside one: autograd as usual).
class HookedEngine : public torch::autograd::Engine {
 public:
  std::unique_ptr<torch::autograd::SavedVariableHooks> get_default_saved_variable_hooks()
      override {
    if (tls_saving == nullptr) return nullptr;
    return std::make_unique<Hook>(tls_saving);
  }
};

torch::autograd::Engine& GetHookedEngine() {
  // Never destroyed: autograd's threads may outlive static destruction.
  static HookedEngine* engine = new HookedEngine();
  return *engine;
}

at::Tensor ViewOf(const c10::Storage& storage, at::ScalarType dtype, int64_t offset,
                  at::IntArrayRef sizes, at::IntArrayRef strides) {
  at::Tensor t = at::empty({0}, at::TensorOptions().dtype(dtype).device(storage.device()));
  t.set_(storage, offset, sizes, strides);
  return t;
}

at::Tensor BytesOf(const c10::Storage& storage, int64_t nbytes) {
  return ViewOf(storage, at::kByte, 0, {nbytes}, {1});
}

}  // namespace

void InstallSavedTensorHooks() {
  static std::once_flag once;
  std::call_once(once, [] {
    GetHookedEngine();
    torch::autograd::set_default_engine_stub(&GetHookedEngine);
  });
}

namespace {
// Installed before main in every program that links this file: no
// backward, on any device, can run on LibTorch's base engine first
// (saved_tensors.h says why that breaks the GPU's backward).
[[maybe_unused]] const bool kInstalledBeforeMain = (InstallSavedTensorHooks(), true);
}  // namespace

SavedTensors::SavedTensors(const std::vector<at::Tensor>& weights) {
  // Only their storages' identity is needed while the forward packs: no
  // reference that would hold the forward's weights on the device.
  for (const at::Tensor& w : weights) {
    WeightPlace p;
    if (w.defined() && w.has_storage()) {
      p.storage = w.storage().unsafeGetStorageImpl();
      p.offset = w.storage_offset();
      p.numel = w.numel();
    }
    weights_.push_back(p);
  }
}

uint64_t SavedTensors::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = 0;
  for (const Entry& e : entries_) total += e.nbytes;
  return total;
}

int SavedTensors::saved_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return saved_;
}

std::shared_ptr<SavedTensors::Slot> SavedTensors::Pack(const at::Tensor& t) {
  auto slot = std::make_shared<Slot>();
  std::lock_guard<std::mutex> lock(mu_);
  ++saved_;
  if (!t.defined()) {
    slot->undefined = true;
    return slot;
  }
  if (!t.has_storage() || t.is_sparse() || t.layout() != at::kStrided) {
    slot->held = t;
    return slot;
  }
  slot->sizes = t.sizes().vec();
  slot->strides = t.strides().vec();
  slot->dtype = t.scalar_type();
  const c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  // The weight whose elements it starts in (weights may share one flat
  // storage), else the first on its storage.
  int weight = -1;
  for (size_t i = 0; i < weights_.size(); ++i) {
    const WeightPlace& w = weights_[i];
    if (w.storage != impl) continue;
    if (weight < 0) weight = static_cast<int>(i);
    if (t.storage_offset() >= w.offset && t.storage_offset() < w.offset + w.numel) {
      weight = static_cast<int>(i);
      break;
    }
  }
  if (weight >= 0) {
    slot->weight = weight;
    slot->offset = t.storage_offset() - weights_[weight].offset;
    return slot;
  }
  slot->offset = t.storage_offset();
  for (size_t e = 0; e < entries_.size(); ++e) {
    if (entries_[e].storage.unsafeGetStorageImpl() == impl) {
      slot->entry = static_cast<int>(e);
      return slot;
    }
  }
  Entry e;
  e.storage = t.storage();
  e.nbytes = t.storage().nbytes();
  e.device = t.device();
  entries_.push_back(std::move(e));
  slot->entry = static_cast<int>(entries_.size()) - 1;
  return slot;
}

at::Tensor SavedTensors::Unpack(const Slot& slot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slot.undefined) return at::Tensor();
  if (slot.held.defined()) return slot.held;
  if (slot.weight >= 0) {
    TORCH_CHECK(slot.weight < static_cast<int>(weights_now_.size()) &&
                    weights_now_[slot.weight].defined(),
                "a kept backward reads weight ", slot.weight,
                " but the backward's weights were not set (SavedTensors::SetWeights)");
    const at::Tensor& w = weights_now_[slot.weight];
    return ViewOf(w.storage(), slot.dtype, w.storage_offset() + slot.offset, slot.sizes,
                  slot.strides);
  }
  TORCH_CHECK(slot.entry >= 0 && slot.entry < static_cast<int>(entries_.size()),
              "a kept tensor names storage ", slot.entry, " of ", entries_.size(),
              " this SavedTensors holds (unpacked from another one?)");
  const Entry& e = entries_[slot.entry];
  TORCH_CHECK(e.host.defined() == false && (e.nbytes == 0 || e.storage.data() != nullptr),
              "a kept activation of ", e.nbytes, " bytes is still on the host: Restore first");
  return ViewOf(e.storage, slot.dtype, slot.offset, slot.sizes, slot.strides);
}

void SavedTensors::Offload(const std::function<at::Tensor(const at::Tensor&)>& to_host) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_) {
    if (e.host.defined()) continue;
    e.host = to_host(BytesOf(e.storage, static_cast<int64_t>(e.nbytes)));
    e.storage = c10::Storage();
  }
  // The forward is over: its weights' storages are no longer looked for.
  for (WeightPlace& w : weights_) w.storage = nullptr;
}

void SavedTensors::Restore(const std::function<at::Tensor(const at::Tensor&)>& to_device) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_) {
    if (!e.host.defined()) continue;
    const at::Tensor device = to_device(e.host);
    TORCH_CHECK(device.storage_offset() == 0 && device.nbytes() == e.nbytes,
                "a restored activation must be a fresh copy of ", e.nbytes, " bytes");
    e.storage = device.storage();
    e.host = at::Tensor();
  }
}

void SavedTensors::SetWeights(std::vector<at::Tensor> weights) {
  std::lock_guard<std::mutex> lock(mu_);
  weights_now_ = std::move(weights);
}

SaveInto::SaveInto(std::shared_ptr<SavedTensors> saved) : previous_(std::move(tls_saving)) {
  tls_saving = std::move(saved);
}

SaveInto::~SaveInto() { tls_saving = std::move(previous_); }

}  // namespace harmony::common
