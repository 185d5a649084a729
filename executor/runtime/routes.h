// What travels between tasks (docs/DESIGN.md §6.3), fixed by the plan and
// the decomposition: for every ACTIVATIONS_OUT and STASH_OUT transfer of the
// plan, the values it carries; forward's arguments each task reads; which
// vLayers read each vLayer output; which outputs carry the microbatch in
// dimension 0.
//
// Thread-safety: built once by Runtime::Create, immutable after: every
// device's compute and copy threads read it without a lock.

#ifndef HARMONY_EXECUTOR_RUNTIME_ROUTES_H_
#define HARMONY_EXECUTOR_RUNTIME_ROUTES_H_

#include <map>
#include <set>
#include <tuple>
#include <vector>

#include <ATen/core/ivalue.h>

#include "absl/status/statusor.h"
#include "common/decomposer.h"
#include "executor/runtime/mailbox.h"
#include "plan/task_graph.h"
#include "proto/plan.pb.h"

namespace harmony::executor {

class Routes {
 public:
  Routes() = default;

  // From the plan's task graph, the decomposition it runs and the profile
  // it was planned from (whose output shapes say what is batched).
  // InvalidArgument for a plan that sends to a task it does not have.
  static absl::StatusOr<Routes> Create(const plan::TaskGraph& graph,
                                       const common::Decomposition& dec,
                                       const proto::Profile& profile);

  // Values produced in `producer` (forward's arguments when producer.begin
  // is -1) and read by vLayers in `consumer`.
  std::vector<Ref> Between(plan::PackRange producer, plan::PackRange consumer) const;

  // What transfer `x` of task `t` carries: a stash, everything the receiver
  // reads from before it; a forward, what it makes and the receiver reads;
  // a backward, the gradients of its inputs the receiver made. Internal when
  // the plan has no such transfer.
  absl::StatusOr<const std::vector<Ref>*> Of(const plan::Task& t, const plan::Transfer& x) const;

  // Forward's arguments task `t` reads.
  absl::StatusOr<const std::vector<Ref>*> DataOf(const plan::Task& t) const;

  // Whether a vLayer in (k, end) reads `ref` (an output of a vLayer).
  bool ReadBetween(const Ref& ref, int k, int end) const;

  // Whether `v` (value `r`) has the microbatch of `size` as dimension 0.
  bool IsBatched(const Ref& r, const c10::IValue& v, int size) const;

 private:
  const common::Decomposition* dec_ = nullptr;
  std::map<std::tuple<int, int, int>, std::vector<Ref>> routes_;  // (task, to, kind).
  std::map<int, std::vector<Ref>> data_;                          // By task.
  // readers_[k][i]: the vLayers reading output i of vLayer k, in order. A
  // value may be read by several vLayers of one pack and by later packs (a
  // rotary table or a mask sliced once and passed to every block): a task
  // keeps it while any vLayer of its own still reads it.
  std::vector<std::map<int, std::set<int>>> readers_;
  // batched_[k][i]: output i of vLayer k has the microbatch as dimension 0
  // (at every profiled size).
  std::vector<std::vector<bool>> batched_;
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_ROUTES_H_
