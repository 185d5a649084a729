// Weights that cross the host link once in vDP (docs/DESIGN.md §6.3, the
// plan's peer_weights): device 0's task swaps a pack's parameters in from
// the host, and the task at the same place in every other device's list
// copies them from device 0 instead. The source publishes its parameters
// (detached from their gradients) once they are on its device and keeps
// them until every copier has taken them; meanwhile its device places
// nothing else in their room, and its next task does not compute.
//
// Thread-safety: thread-safe, with its own lock. The devices' weights
// streams call WaitForRoom, Take, Taken and Publish (and each device's task
// list WaitForRoom before a task computes); the thread driving the
// runtime calls StartIteration between iterations; Stop (any thread) ends
// every wait with Cancelled when a task has failed.

#ifndef HARMONY_EXECUTOR_RUNTIME_PEER_WEIGHTS_H_
#define HARMONY_EXECUTOR_RUNTIME_PEER_WEIGHTS_H_

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "plan/task_graph.h"

namespace harmony::executor {

class PeerWeights {
 public:
  PeerWeights() = default;

  // From the plan's WEIGHTS_IN transfers over PEER. InvalidArgument when a
  // task copies from a device that has no task of the same pack at the same
  // place in its list.
  static absl::StatusOr<std::unique_ptr<PeerWeights>> Create(const plan::TaskGraph& graph,
                                                             int num_devices);

  // The task whose parameters `task` copies, if it copies any.
  std::optional<int> SourceOf(int task) const;

  // Waits until no task of `device` up to position `room_of` in its list
  // still has copiers to wait for (their weights occupy the room the next
  // swap-in takes). Returns the source task waited for (-1: none).
  absl::StatusOr<int> WaitForRoom(int device, int room_of);

  // Waits until `source` has published its parameters; returns them (a
  // list per vLayer) and the device they are on.
  struct Published {
    std::vector<std::vector<at::Tensor>> params;
    int device = 0;
  };
  absl::StatusOr<Published> Take(int source);
  // A copier is done with `source`'s parameters (the last frees them).
  void Taken(int source);

  // Task `task` on `device` publishes its parameters for the tasks that
  // copy them (nothing when none does).
  void Publish(int task, int device, const std::vector<std::vector<at::Tensor>>& params);

  // Between iterations: nothing published, nothing stopped.
  void StartIteration();
  // Ends every wait, now and until StartIteration, with Cancelled.
  void Stop();

 private:
  struct Shared {
    int device = 0;
    int position = 0;  // In the device's list.
    int remaining = 0;
    std::vector<std::vector<at::Tensor>> params;
  };

  // Fixed at Create.
  std::map<int, int> source_;   // Copying task -> the task it copies from.
  std::map<int, int> copies_;   // Source task -> how many tasks copy it.
  std::vector<int> position_;   // Each task's place in its device's list.

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;             // Guarded by mu_.
  std::map<int, Shared> shared_;     // By source task; guarded by mu_.
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_PEER_WEIGHTS_H_
