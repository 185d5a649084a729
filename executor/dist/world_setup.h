// A world of servers set up on a Collective (docs/DESIGN.md §8): the
// runtime's World bound to it, a check that every rank runs the same job,
// and small values shared from one rank (a checkpoint rank 0 read, a
// decision to write one). Every function here is collective.

#ifndef HARMONY_EXECUTOR_DIST_WORLD_SETUP_H_
#define HARMONY_EXECUTOR_DIST_WORLD_SETUP_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "executor/dist/collective.h"
#include "executor/runtime/world.h"

namespace harmony::executor {

// The runtime's view of `collective` (which must outlive it).
World MakeWorld(Collective& collective, bool shard_optimizer_state);

// What must be the same on every rank, as (name, value): the model's hash,
// the plan's minibatch, the optimizer... FailedPrecondition on every rank
// when one differs, naming the field, the rank and both values.
absl::Status CheckSameEverywhere(Collective& collective,
                                 const std::vector<std::pair<std::string, std::string>>& fields);

// `root`'s bytes on every rank (the others pass anything).
absl::StatusOr<std::string> ShareBytes(Collective& collective, const std::string& bytes, int root);

// True on every rank when it is on any.
absl::StatusOr<bool> AnyRank(Collective& collective, bool mine);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_DIST_WORLD_SETUP_H_
