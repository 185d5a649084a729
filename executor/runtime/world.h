// The servers a job trains on together (docs/DESIGN.md §8): this
// server's rank, how many there are, and the collectives the runtime calls
// across them. executor/dist provides the collectives on c10d (Gloo); the
// runtime sees only these functions, so it does not depend on c10d.
//
// Every call is collective: each rank makes the same calls, on tensors of
// the same shapes, in the same order (the plan's update order), or the world
// waits until its timeout and fails.

#ifndef HARMONY_EXECUTOR_RUNTIME_WORLD_H_
#define HARMONY_EXECUTOR_RUNTIME_WORLD_H_

#include <functional>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"

namespace harmony::executor {

struct World {
  int rank = 0;
  int size = 1;
  // ZeRO-1: vLayer k's optimizer state lives on one rank only (its owner,
  // OptimizerStateOwners); its gradients are summed into the owner, which
  // steps and broadcasts the new weights. Without it, every rank holds all
  // the state and steps every vLayer on the allreduced gradients.
  bool shard_optimizer_state = false;
  // Sums the tensor over the ranks, in place on every rank.
  std::function<absl::Status(at::Tensor&)> all_reduce_sum;
  // Sums it into `root`'s; the others' are left as they were.
  std::function<absl::Status(at::Tensor&, int root)> reduce_sum_to;
  // `root`'s values into every rank's tensor.
  std::function<absl::Status(at::Tensor&, int root)> broadcast;

  bool distributed() const { return size > 1; }
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_WORLD_H_
