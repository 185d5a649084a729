// vDP's reduction of a backward pack's gradients across the devices
// (docs/DESIGN.md §6.3): every device but the one that sums hands its
// gradients over and waits until they are summed (they stay on its device
// until then, so its next task must not start beside them); the device that
// sums takes each other device's in device order and says when it is done.
//
// Thread-safety: thread-safe, with its own lock. The devices' compute
// threads call Hand, Take and Summed; the thread driving the runtime calls
// StartIteration between iterations; Stop (any thread) ends every wait with
// Cancelled when a task has failed.

#ifndef HARMONY_EXECUTOR_RUNTIME_GRADIENT_REDUCTION_H_
#define HARMONY_EXECUTOR_RUNTIME_GRADIENT_REDUCTION_H_

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"

namespace harmony::executor {

class GradientReduction {
 public:
  // Task `task` hands over its gradients (a list per vLayer) and waits
  // until the summing device has added them.
  absl::Status Hand(int task, std::vector<std::vector<at::Tensor>> grads);
  // Waits for task `task`'s gradients and takes them.
  absl::StatusOr<std::vector<std::vector<at::Tensor>>> Take(int task);
  // Task `task`'s gradients are summed: its Hand returns.
  void Summed(int task);

  // Between iterations: nothing handed over, nothing stopped.
  void StartIteration();
  // Ends every wait, now and until StartIteration, with Cancelled.
  void Stop();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;                                      // Guarded by mu_.
  std::map<int, std::vector<std::vector<at::Tensor>>> slots_;  // By task; guarded by mu_.
  std::set<int> summed_;                                      // Guarded by mu_.
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_GRADIENT_REDUCTION_H_
