// Turns a searched and simulated task graph into the plan file harmony-exec
// runs (proto::Plan, schema v1), and plans into text for people.
//
// The plan carries no timestamp: the same profile and options give a
// byte-identical plan.
//
// Thread-safety: stateless functions.

#ifndef HARMONY_PLANNER_PLAN_PLAN_BUILDER_H_
#define HARMONY_PLANNER_PLAN_PLAN_BUILDER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "plan/plan_reader.h"
#include "planner/search/task_graph.h"
#include "planner/sim/simulator.h"
#include "proto/plan.pb.h"

namespace harmony::planner {

// `ondemand`: the simulated on-demand baseline for the same model and
// minibatch, when there is one (its swap bytes go into the estimates).
proto::Plan BuildPlan(const proto::ProfileFile& profile, const TaskGraph& graph,
                      const SimResult& sim, const std::optional<SimResult>& ondemand);

// What the planner prints after a search and `inspect` prints first: mode
// and sizes, packs, iteration time and samples/s, per-device peak vs the
// cap, host memory, swap bytes per iteration against the on-demand
// baseline's.
std::string PlanSummary(const proto::Plan& plan);

// Every device's task list with its transfers, one line a task.
std::string PlanTasks(const proto::Plan& plan);

// Reading a plan back (plan/plan_reader.h).
using plan::ProfileOfPlan;
using plan::TaskGraphFromPlan;

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_PLAN_PLAN_BUILDER_H_
