// Building and validating the task graph of one training iteration
// (docs/DESIGN.md §5.4; its types are the plan contract, plan/task_graph.h):
// what each device runs, in order, with every swap and transfer it makes and
// their sizes.
//
// Harmony's order: the forward tasks of all forward packs in pack order,
// then for each backward pack in reverse, its backward task immediately
// followed by its update (on the host's CPU optimizer). The last backward
// pack fuses forward, loss and backward. A task runs all its microbatches
// while the pack's weights are resident (input-batch grouping).
//
// vPP places the GPU tasks (forwards, then backwards) round-robin over the
// devices; activations go device-to-device where consecutive tasks are on
// different devices, through the host otherwise; each backward pack's input
// is stashed to the host at forward time. vDP gives every device every pack
// over its share of the minibatch; activations hop through the host, and
// gradients are summed across devices before the update. A device's last
// forward pack stays resident into its first backward task when they are
// the same pack. Every task lists its weight swap-in, and the task before it
// on the same device lists the prefetch of those weights (unless the config
// is single-buffered: Config::prefetch).
//
// Thread-safety: plain values.

#ifndef HARMONY_PLANNER_SEARCH_TASK_GRAPH_H_
#define HARMONY_PLANNER_SEARCH_TASK_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "plan/task_graph.h"
#include "planner/search/cost_model.h"
#include "planner/search/packing.h"

namespace harmony::planner {

// The plan contract's types (plan/task_graph.h), as the planner names them.
using plan::Channel;
using plan::Config;
using plan::Microbatch;
using plan::Mode;
using plan::ModeName;
using plan::Schedule;
using plan::ScheduleName;
using plan::SplitMicrobatches;
using plan::SumsGradientsOnHost;
using plan::Task;
using plan::TaskGraph;
using plan::TaskKind;
using plan::TaskKindName;
using plan::Transfer;
using plan::TransferKind;
using plan::TransferKindName;
using plan::WaveSamples;
using plan::WaveSlice;

// InvalidArgument naming the problem when `config` is malformed (packs
// that do not cover the vLayers, U_f < U_b, more devices than samples for
// vDP).
absl::Status ValidateConfig(const CostModel& model, const Config& config);

// The forward pack holding every vLayer of backward pack `r` (whose forward
// task can keep r's activations: Config::keep), or -1.
int KeepSource(const Packing& forward_packs, const PackRange& r);

// Builds Harmony's task graph for `config`. InvalidArgument when the config
// is malformed (packs that do not cover the vLayers, U_f < U_b, more
// devices than samples for vDP).
absl::StatusOr<TaskGraph> BuildTaskGraph(const CostModel& model, const Config& config);

// Checks coverage (every vLayer in exactly one forward pack, except the
// fused last backward pack's, and in exactly one backward pack), that every
// send has its receive (same bytes, matching devices and tasks), that every
// phase processes each sample of the minibatch exactly once, and that
// dependencies point backwards. InvalidArgument naming the first problem.
absl::Status ValidateTaskGraph(const CostModel& model, const TaskGraph& graph);


}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_SEARCH_TASK_GRAPH_H_
