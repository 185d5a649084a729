// The decomposer: splits a TorchScript model's forward into vLayers, shared
// by the planner (which chooses the cut points) and the executor (which
// re-creates the same vLayers from the cut points in the plan). docs/DESIGN.md §4.
//
// How: forward's graph is inlined; every read of a parameter or buffer
// (a prim::GetAttr chain from self) becomes an explicit graph input, one per
// tensor however many names it has (tied weights, an RNN's list of its
// weights), and
// every other attribute (ints, floats, lists, the `training` flag) becomes a
// constant, so the graph is a pure function of (data, weights). Its top-level
// nodes, constants aside, are numbered 0..N-1; a vLayer is a contiguous node
// range [cut_i, cut_{i+1}). Cuts follow module boundaries (the inlined call
// stacks), where few tensors are live, never between a tensor and an in-place
// update of it.
//
// Each vLayer is a pure function
//     f(parameters..., buffers..., live-ins...) -> live-outs...
// Live-ins come straight from the vLayer that produced them (or from
// forward's arguments): a residual or a mask is not relayed through the
// vLayers in between. In-place buffer updates (BatchNorm's running
// statistics) write to the buffer tensors passed in, so a recompute given
// scratch copies leaves the real statistics alone.
//
// The module is decomposed as it behaves in its current mode: call
// module.train() first for training.
//
// What crosses a cut: the live-outs of a vLayer are tensors (a parameter's
// view, a buffer's slice, a tensor made inside forward: each travels as the
// tensor it is), Optional[Tensor]s, and values without tensors inside (ints
// and floats from shapes, bools, strings, None): gradients flow back
// through the tensors. A list of tensors built in forward and appended to
// as it goes (DenseNet's features, a recommender's embedded tables) is
// rebuilt before each reader from its elements (common/tensor_lists.h), so
// only the elements cross cuts. Any other value holding tensors (a tuple, a
// list from split or chunk, a dict) never crosses a cut: the decomposer
// does not cut where one is live, and CreateWithCuts refuses such a cut
// point, naming the value.
//
// Thread-safety: a Decomposition is immutable after Create; Run may be
// called from several threads at once.

#ifndef HARMONY_COMMON_DECOMPOSER_H_
#define HARMONY_COMMON_DECOMPOSER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/jit/api/module.h>

#include "absl/status/statusor.h"

namespace harmony::common {

struct DecomposeOptions {
  // 0: one vLayer per block (top-level module calls, opening up any call
  // that holds more than half the parameters). N > 0: about N vLayers,
  // merging the lightest neighbours or splitting the heaviest block along
  // its own module boundaries.
  int granularity = 0;
  // 0: no limit. Otherwise a vLayer whose parameters hold more bytes than
  // this is cut along its own module boundaries (a dense block layer by
  // layer, a loop over a ModuleList entry by entry, a Sequential module by
  // module) until it holds no more or cannot be cut further. harmony-plan
  // sets it when no schedule fits the devices with the vLayers per block.
  uint64_t max_vlayer_weight_bytes = 0;
  // Each block (after the above) cut once more along its own modules: a
  // transformer block into its norms, attention and MLP; a residual block
  // into its convolutions and norms (harmony-plan --split-blocks). Each
  // part's backward needs less memory than the block's; the search may
  // still pack the parts back together.
  bool split_blocks = false;
  // The element of forward's output that training uses, when forward
  // returns a tuple, list, dict or NamedTuple: an index ("0"), a dict key or
  // a field name ("loss"); see common/model_output.h, which chooses one.
  // Empty: forward's output itself, which must then be a tensor.
  std::string output;
};

// Where a vLayer's live-in comes from: output `index` of vLayer `producer`,
// or, with producer = -1, forward's argument `index` (self not counted).
struct ValueSource {
  int producer = -1;
  int index = 0;
};

struct VLayerInfo {
  int index = 0;
  // The module the vLayer mostly belongs to, e.g. "h.3" (the common prefix
  // of its parameters), or "" for the model itself.
  std::string scope;
  // Node range [node_begin, node_end).
  int node_begin = 0;
  int node_end = 0;
  // Fully qualified names, in the order Run takes them.
  std::vector<std::string> parameters;
  std::vector<std::string> buffers;
  std::vector<ValueSource> inputs;
  // Whether each output is a tensor (the others are ints, lists, ...).
  std::vector<bool> output_is_tensor;
  // Draws random numbers (dropout) / writes to a buffer in place.
  bool uses_rng = false;
  // Draws from LibTorch's global generator (a random op other than
  // dropout, which draws from the thread's: common/dropout.h); the runtime
  // runs such a vLayer under a lock.
  bool global_rng = false;
  bool updates_buffers = false;

  int num_outputs() const { return static_cast<int>(output_is_tensor.size()); }
};

class Decomposition {
 public:
  // Decomposes model.forward into vLayers. InvalidArgument when the model
  // has no forward, or uses what cannot be decomposed (assigning to self
  // attributes, module values used as data), with the reason.
  static absl::StatusOr<std::unique_ptr<Decomposition>> Create(
      const torch::jit::Module& model, const DecomposeOptions& options);

  // Re-creates the vLayers at given cut points (from a plan). The first
  // must be 0, they must increase, stay below the node count and not split
  // a tensor from an in-place update of it; InvalidArgument otherwise.
  // `output` as DecomposeOptions::output.
  static absl::StatusOr<std::unique_ptr<Decomposition>> CreateWithCuts(
      const torch::jit::Module& model, const std::vector<int>& cut_points,
      const std::string& output = "");

  ~Decomposition();
  Decomposition(const Decomposition&) = delete;
  Decomposition& operator=(const Decomposition&) = delete;

  const std::vector<VLayerInfo>& vlayers() const { return vlayers_; }
  int num_vlayers() const { return static_cast<int>(vlayers_.size()); }
  const std::vector<int>& cut_points() const { return cut_points_; }
  int num_nodes() const { return num_nodes_; }
  // Names of forward's arguments, self excluded.
  const std::vector<std::string>& forward_arguments() const {
    return forward_arguments_;
  }
  // Number of tensor live-ins crossing each cut (one entry per cut point
  // after the first).
  const std::vector<int>& live_tensors_at_cuts() const { return live_at_cuts_; }

  // Runs vLayer `k`: `parameters` and `buffers` in the order of
  // vlayers()[k], `inputs` in the order of vlayers()[k].inputs. Returns its
  // outputs. Runs in the caller's grad mode, on the caller's RNG, with the
  // JIT optimiser off (so results match the unoptimised module bit for bit).
  // InvalidArgument on a wrong count; a LibTorch error inside is
  // InvalidArgument naming the vLayer.
  absl::StatusOr<std::vector<c10::IValue>> Run(
      int k, const std::vector<at::Tensor>& parameters,
      const std::vector<at::Tensor>& buffers,
      const std::vector<c10::IValue>& inputs) const;

  // The vLayer's graph, for people.
  std::string GraphText(int k) const;

  // Node `i` of forward's inlined graph and the module calls it came from
  // (outermost first), for people.
  std::string NodeText(int i) const;

 private:
  struct Impl;
  explicit Decomposition(std::unique_ptr<Impl> impl);
  // Builds the vLayer graphs and their infos for `cuts`.
  absl::Status BuildVLayers(const std::vector<int>& cuts);

  std::unique_ptr<Impl> impl_;
  std::vector<VLayerInfo> vlayers_;
  std::vector<int> cut_points_;
  std::vector<int> live_at_cuts_;
  std::vector<std::string> forward_arguments_;
  int num_nodes_ = 0;
};

// The tensor (parameter, buffer or tensor attribute) at a qualified name
// such as "h.0.attn.c_attn.weight". NotFound when there is none.
absl::StatusOr<at::Tensor> ResolveTensor(const torch::jit::Module& model,
                                         const std::string& qualified_name);

// Every parameter and buffer name of `model` mapped to the name vLayers use
// for its tensor. A tensor held under several names (a tied weight,
// `lm_head.weight = wte.weight`) is one tensor, named as PyTorch's
// named_parameters() (then named_buffers()) first lists it; its other names
// map to that one.
std::map<std::string, std::string> TensorAliases(const torch::jit::Module& model);

// ResolveTensor for each name, in order (a vLayer's parameters or buffers).
absl::StatusOr<std::vector<at::Tensor>> ResolveTensors(
    const torch::jit::Module& model, const std::vector<std::string>& names);

}  // namespace harmony::common

#endif  // HARMONY_COMMON_DECOMPOSER_H_
