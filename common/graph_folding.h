// Forward's graph folded before the decomposer chooses cuts (called by
// MakePureGraph, common/pure_graph.h; docs/DESIGN.md §4).

#ifndef HARMONY_COMMON_GRAPH_FOLDING_H_
#define HARMONY_COMMON_GRAPH_FOLDING_H_

#include <map>

#include "common/pure_graph.h"

namespace harmony::common::pure_graph {

// Folds what the module's constants decide, replaces the dicts forward
// fills and reads under constant keys by their values, and moves each empty
// container to its first use. torchvision's IntermediateLayerGetter
// (DeepLab, FCN, detection backbones) makes an empty dict at forward's start
// and fills it under `if name in self.return_layers:` after each child:
// unfolded, every child reads the dict, which holds tensors and may not
// cross a cut, so the whole backbone was one vLayer. `self.training` is held
// out of the folding (`training`: the prim::Uninitialized nodes
// LiftAttributes put in its place, by value) and put in afterwards: eval
// mode must decompose into the same nodes, as the evaluator cuts it where
// the plan cut training's.
void FoldConstants(Graph& graph, const std::map<bool, Node*>& training);

}  // namespace harmony::common::pure_graph

#endif  // HARMONY_COMMON_GRAPH_FOLDING_H_
