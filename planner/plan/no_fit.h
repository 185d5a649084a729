// When no schedule fits the devices: what to change. Names the vLayer that
// needs the most memory at the smallest microbatch (its index, the module
// scope and node range it came from, its weight, gradient and activation
// bytes), the device capacity and reserve, and the smallest device memory
// at which the search finds a plan, found by running the search (MakePlan)
// at the sizes it bisects, not estimated.
//
// Thread-safety: stateless.

#ifndef HARMONY_PLANNER_PLAN_NO_FIT_H_
#define HARMONY_PLANNER_PLAN_NO_FIT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "planner/plan/make_plan.h"
#include "proto/plan.pb.h"

namespace harmony::planner {

// The smallest `device_memory` at which MakePlan(profile, options) returns
// a plan that fits, within 1% (or 4 KiB), rounded up to a 64 KiB multiple.
// The search is pinned to options.microbatch when it is set, else to the
// profile's smallest microbatch, which needs the least memory;
// options.device_memory is where it starts (it may fit already). NotFound when nothing plans even at 1 PiB; the search's other
// errors as they come.
absl::StatusOr<uint64_t> SmallestDeviceMemory(const proto::ProfileFile& profile,
                                              MakePlanOptions options);

// The vLayer whose forward or backward alone needs the most device memory
// at the profile's smallest microbatch, and what makes up its need.
struct LargestVLayer {
  int index = -1;
  std::string scope;            // Module scope, e.g. "classifier.0".
  int node_begin = 0, node_end = 0;  // Ops [begin, end) of forward's graph.
  int microbatch = 1;
  uint64_t weight_bytes = 0;    // Parameters and buffers.
  uint64_t gradient_bytes = 0;
  uint64_t activation_bytes = 0;  // Inputs, outputs and what autograd keeps.
  uint64_t need_bytes = 0;      // Its measured peak, the larger pass.
  bool backward = true;         // Which pass needs need_bytes.
  // Its backward's peak with its gradients summed on the host after each
  // microbatch (a first microbatch's; 0: not measured or no smaller).
  uint64_t host_summed_bytes = 0;
};
absl::StatusOr<LargestVLayer> FindLargestVLayer(const proto::ProfileFile& profile);

// "nothing fits 2 devices of 384.00 MiB (10% kept free): vLayer 3
// (classifier.0, ops 120-131) alone needs 1.15 GiB for its backward at
// microbatch 1: weights 392.00 MiB, gradients 392.00 MiB, activations
// 8.00 KiB; the smallest --device-memory that plans is 1.29 GiB".
// `smallest` 0: not found (the sentence says so). With options.microbatch
// pinned, the smallest memory is said to be at that microbatch.
std::string DescribeNoFit(const LargestVLayer& layer, const MakePlanOptions& options,
                          uint64_t smallest);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_PLAN_NO_FIT_H_
