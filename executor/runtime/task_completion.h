// One iteration's progress (docs/DESIGN.md §6.3): which tasks are done (a
// device or update task is done when what it copies out has arrived), the
// first error any thread met, and the microbatches' losses. A device's task
// waits for the task two before it on the same device (its copies out must
// have left the device, as the plan counts them); an update waits for the
// backward tasks whose gradients it applies. Every wait ends when a thread
// fails.
//
// Thread-safety: thread-safe, with its own lock. The devices' compute and
// copy-out threads and the host's update thread wait and mark; the thread
// driving the runtime calls StartIteration and reads the results after the
// iteration's threads have joined.

#ifndef HARMONY_EXECUTOR_RUNTIME_TASK_COMPLETION_H_
#define HARMONY_EXECUTOR_RUNTIME_TASK_COMPLETION_H_

#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

#include "absl/status/status.h"

namespace harmony::executor {

class TaskCompletion {
 public:
  // An iteration of `tasks` tasks, none done, no error, no losses.
  void StartIteration(int tasks);

  void MarkDone(int task);
  // Waits until every task of `tasks` is done; Cancelled once a thread has
  // failed.
  absl::Status WaitDone(const std::vector<int>& tasks);

  // Whether every task of `tasks` is done now (does not wait).
  bool AllDone(const std::vector<int>& tasks) const;

  // The first failure wins; returns whether this was it.
  bool Fail(const absl::Status& status);
  absl::Status error() const;

  // The loss of the microbatch starting at sample `offset` (scaled by its
  // share of the minibatch).
  void AddLoss(int offset, double loss);
  // Their sum, in sample order.
  double TotalLoss() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> done_;         // By task; guarded by mu_.
  absl::Status error_;             // Guarded by mu_.
  std::map<int, double> losses_;   // By first sample; guarded by mu_.
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_TASK_COMPLETION_H_
