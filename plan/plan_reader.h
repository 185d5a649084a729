// Reading a plan file's task graph (the plan contract, docs/DESIGN.md §5.6):
// the executor runs what this returns; the planner writes plans with
// planner/plan/plan_builder.h (BuildPlan), of which this is the inverse.
//
// Thread-safety: stateless functions.

#ifndef HARMONY_PLAN_PLAN_READER_H_
#define HARMONY_PLAN_PLAN_READER_H_

#include "absl/status/statusor.h"
#include "plan/task_graph.h"
#include "proto/plan.pb.h"

namespace harmony::plan {

// The task graph a plan carries, back in domain types, and the profile it
// was planned from. InvalidArgument naming the first thing that is
// malformed (an unknown enum, a task id out of order, a task on a device
// the plan does not have).
absl::StatusOr<TaskGraph> TaskGraphFromPlan(const proto::Plan& plan);
proto::ProfileFile ProfileOfPlan(const proto::Plan& plan);

// The plan file's names of the contract's enums (BuildPlan writes them).
proto::TransferKind ToProto(TransferKind kind);
proto::Channel ToProto(Channel channel);
proto::TaskKind ToProto(TaskKind kind);
proto::Schedule ToProto(Schedule schedule);

}  // namespace harmony::plan

#endif  // HARMONY_PLAN_PLAN_READER_H_
