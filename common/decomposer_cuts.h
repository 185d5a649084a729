// Internal to the decomposer (common/decomposer.h, docs/DESIGN.md §4): where
// to cut a model's pure graph into vLayers. Cuts follow module boundaries
// (the nodes' call stacks), opening a call that holds more than its share
// of the parameters, merge parameter-free glue into a neighbour where the
// fewest tensors are live, and balance the parameters over about
// `granularity` vLayers (0: one per block).
//
// Thread-safety: a stateless function.

#ifndef HARMONY_COMMON_DECOMPOSER_CUTS_H_
#define HARMONY_COMMON_DECOMPOSER_CUTS_H_

#include <cstdint>
#include <vector>

#include "common/pure_graph.h"

namespace harmony::common::decomposer_internal {

using pure_graph::PureGraph;

// `elements`: parameter elements first read by each node (for balancing);
// `bytes`: their bytes; `reads_params`: whether a node reads any parameter
// (for grouping); `max_unit_bytes` (0: none): a unit whose parameters hold
// more is cut along its own module boundaries until it holds no more or
// cannot be cut further; `split_blocks`: then every unit is cut once more
// along its own modules, where it can be. Returns the cut points, the first 0.
std::vector<int> ChooseCuts(const PureGraph& pure, const std::vector<int64_t>& elements,
                            const std::vector<int64_t>& bytes,
                            const std::vector<bool>& reads_params, int granularity,
                            uint64_t max_unit_bytes, bool split_blocks = false);

}  // namespace harmony::common::decomposer_internal

#endif  // HARMONY_COMMON_DECOMPOSER_CUTS_H_
