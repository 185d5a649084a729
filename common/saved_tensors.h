// Autograd's saved tensors kept from a forward for its backward, so that the
// backward runs without recomputing the forward (docs/DESIGN.md §6.10).
//
// While a SaveInto is alive on a thread, every tensor autograd saves for a
// backward on that thread (an op's input, output, mask...) is handed to a
// SavedTensors instead of being held by the graph: each distinct storage
// once, except the weights', which are recorded by position and resolved to
// whatever weights are set when the backward unpacks them (the backward
// task's own copies: the same values, since no update runs in between).
// The storages can then be moved to host memory (Offload) and back onto a
// device (Restore) between the forward and the backward, byte for byte.
//
// This works through autograd's default saved-variable hooks
// (torch::autograd::Engine::get_default_saved_variable_hooks, the C++ side
// of torch.autograd.graph.saved_tensors_hooks): InstallSavedTensorHooks
// installs an engine whose hooks read this thread's SaveInto.
//
// Thread-safety: a SavedTensors may be filled on one thread, moved on
// another and unpacked on a third, one after another (its own lock).

#ifndef HARMONY_COMMON_SAVED_TENSORS_H_
#define HARMONY_COMMON_SAVED_TENSORS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>

namespace harmony::common {

// Installs (once per process) the autograd engine whose default hooks
// serve SaveInto. Idempotent, and already done before main in any program
// that links this file: it must precede the process's first backward on
// any device. LibTorch 2.x starts the autograd threads of the GPUs once
// per process (one flag for all engines), for whichever engine runs the
// first backward, CPU or GPU; a second engine then has no queue for a GPU
// and every GPU backward on it fails an internal assert in
// Engine::ready_queue (seen on an H100: a CPU profile's backward, then the
// runtime's on the GPU).
void InstallSavedTensorHooks();

class SavedTensors {
 public:
  // `weights`: tensors whose storages are not kept but resolved at unpack
  // time to SetWeights' tensors at the same positions.
  explicit SavedTensors(const std::vector<at::Tensor>& weights);
  SavedTensors(const SavedTensors&) = delete;
  SavedTensors& operator=(const SavedTensors&) = delete;

  // Bytes of the distinct storages kept (the weights' excluded).
  uint64_t bytes() const;
  // Number of saved tensors (each SavedVariable autograd made).
  int saved_count() const;

  // Replaces every kept storage by `to_host(bytes)`, a copy of its bytes (a
  // flat uint8 tensor) in host memory, releasing the device's.
  void Offload(const std::function<at::Tensor(const at::Tensor&)>& to_host);
  // And back: `to_device(bytes)` copies them onto the device.
  void Restore(const std::function<at::Tensor(const at::Tensor&)>& to_device);
  // The weights the backward reads in place of the forward's (the same
  // shapes and dtypes, in the constructor's order).
  void SetWeights(std::vector<at::Tensor> weights);

  // Internal: for the hooks.
  struct Slot;
  std::shared_ptr<Slot> Pack(const at::Tensor& t);
  at::Tensor Unpack(const Slot& slot);

 private:
  struct Entry {
    c10::Storage storage;  // Where the bytes are now (device or restored).
    at::Tensor host;       // While offloaded.
    uint64_t nbytes = 0;
    c10::Device device = c10::Device(c10::kCPU);
  };
  struct WeightPlace {
    const c10::StorageImpl* storage = nullptr;  // Identity only, never read.
    int64_t offset = 0;
    int64_t numel = 0;
  };
  mutable std::mutex mu_;
  std::vector<WeightPlace> weights_;
  std::vector<at::Tensor> weights_now_;
  std::vector<Entry> entries_;
  int saved_ = 0;
};

// Makes autograd on this thread save into `saved` while alive (nests: the
// innermost wins). InstallSavedTensorHooks must have run.
class SaveInto {
 public:
  explicit SaveInto(std::shared_ptr<SavedTensors> saved);
  ~SaveInto();
  SaveInto(const SaveInto&) = delete;
  SaveInto& operator=(const SaveInto&) = delete;

 private:
  std::shared_ptr<SavedTensors> previous_;
};

}  // namespace harmony::common

#endif  // HARMONY_COMMON_SAVED_TENSORS_H_
