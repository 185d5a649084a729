// Forward's graph made pure, for the decomposer (common/decomposer.h) only:
// inlined, with every read of a parameter or buffer turned into a graph
// input (one per tensor, however many names it has), other attributes into
// constants, forward's output narrowed to the element training uses, and
// the facts the partitioning needs (top-level nodes, live tensors at each
// position, where a cut is forbidden, the module calls of each node).
//
// Thread-safety: a PureGraph is immutable once made.

#ifndef HARMONY_COMMON_PURE_GRAPH_H_
#define HARMONY_COMMON_PURE_GRAPH_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>

#include "absl/status/statusor.h"

namespace harmony::common::pure_graph {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

// A parameter, buffer or other tensor attribute that became a graph input.
struct Lifted {
  std::string name;
  bool is_parameter = false;
  Value* input = nullptr;
};

// Forward's graph made pure, and what the partitioning needs to know.
struct PureGraph {
  std::shared_ptr<Graph> graph;
  int num_data_inputs = 0;             // Graph inputs [0, n) are forward's args.
  std::vector<Lifted> lifted;          // The other graph inputs.
  std::unordered_map<const Value*, int> lifted_index;
  std::vector<Node*> nodes;            // Top-level non-constant nodes.
  std::unordered_map<const Node*, int> node_index;
  // Cut positions that would separate a tensor from an in-place update.
  std::vector<bool> forbidden_cut;     // Indexed by position 0..N.
  // Why, for people: the value a cut there would carry or separate.
  std::vector<std::string> cut_blocker;
  // Tensor values live at each position (def < p <= last use).
  std::vector<int> live_tensors;
  // Call-site frame keys of each node, outermost first.
  std::vector<std::vector<std::string>> frames;
};

// InvalidArgument "cannot decompose this model: <what>".
absl::Status Unsupported(absl::string_view what);

// A node as the JIT prints it, on one line.
std::string NodeString(const Node* n);

// The top-level node (a node of the graph's own block) that contains `n`.
Node* TopLevel(Node* n, const Block* top);

// Visits every node in `block` and in the blocks nested inside it.
void ForEachNode(Block* block, const std::function<void(Node*)>& fn);

// Where a tensor's elements live: two attributes with the same key are one
// tensor (a tied weight: `lm_head.weight = wte.weight`, or an LSTM's
// `_flat_weights` list, which holds its parameters), even where loading a
// saved module made two tensor objects over one storage.
using StorageKey = std::tuple<const void*, int64_t, std::vector<int64_t>,
                              std::vector<int64_t>, int>;

StorageKey KeyOf(const at::Tensor& t);

struct TensorName {
  std::string name;
  bool is_parameter = false;
};

// The name of every parameter and buffer, by storage: the first under which
// named_parameters() (then named_buffers()) lists it, as PyTorch names a tied
// weight once, under its first name.
std::map<StorageKey, TensorName> CanonicalNames(const torch::jit::Module& model);

// Makes `model`'s forward pure (see above); `output` as
// DecomposeOptions::output. Appends forward's argument names (self
// excluded) to `arguments`. InvalidArgument when the model cannot be
// decomposed, with the reason.
absl::StatusOr<std::unique_ptr<PureGraph>> MakePureGraph(const torch::jit::Module& model,
                                                        const std::string& output,
                                                        std::vector<std::string>* arguments);

}  // namespace harmony::common::pure_graph

#endif  // HARMONY_COMMON_PURE_GRAPH_H_
