// Lists of tensors made value by value, for the decomposer (part of
// common/pure_graph): a List[Tensor] built in forward and appended to as it
// goes (DenseNet's `features.append(new_features)`, a recommender's
// `embedded.append(table(ids))` over a ModuleList) is mutable state that
// would keep every element inside one vLayer, since a list cannot cross a
// cut. RebuildTensorLists rewrites such lists so that each reader gets a
// fresh list of the elements appended before it:
//
//   features = [x]                       features = [x]   (dead; removed)
//   y = layer0(cat(features))     ==>    y = layer0(cat([x]))
//   features.append(y)                   z = layer1(cat([x, y]))
//   z = layer1(cat(features))            out = cat([x, y, z])
//   features.append(z)
//   out = cat(features)
//
// after which only tensors (x, y, z) are live between the readers, and a cut
// may fall between any two of them. The new list is built just before the
// top-level node that reads it, in that node's module call (so it stays with
// its reader when cut points are chosen).
//
// A list is rewritten when it is built at the top level of forward by
// prim::ListConstruct with tensor elements, and every use is either an
// aten::append at the top level or a read that neither writes to the list
// nor returns a list aliasing it (cat, stack, len, __getitem__, iteration in
// a loop or a branch). Any other list (appended to inside a loop or branch,
// stored in another container, returned, mutated otherwise) is left as it
// is: it cannot cross a cut, so its live range stays inside one vLayer.
//
// Thread-safety: a function of its graph argument only.

#ifndef HARMONY_COMMON_TENSOR_LISTS_H_
#define HARMONY_COMMON_TENSOR_LISTS_H_

#include <torch/csrc/jit/ir/ir.h>

namespace harmony::common::pure_graph {

// Rewrites the graph's top-level lists as above; returns how many lists it
// rewrote.
int RebuildTensorLists(torch::jit::Graph& graph);

}  // namespace harmony::common::pure_graph

#endif  // HARMONY_COMMON_TENSOR_LISTS_H_
