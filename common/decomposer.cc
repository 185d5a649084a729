#include "common/decomposer.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <sstream>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/decomposer_cuts.h"
#include "common/dropout.h"
#include "common/pure_graph.h"
#include "common/status.h"
#include "common/torch_status.h"

namespace harmony::common {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

// A dropout that draws no random numbers: probability 0 or not training,
// as constants (module attributes are constants in the pure graph). Such a
// vLayer needs no seeded generator, so devices run it side by side.
bool DrawsNothing(const torch::jit::Node* n) {
  const auto kind = n->kind();
  if (kind != c10::aten::dropout && kind != c10::aten::feature_dropout &&
      kind != c10::aten::alpha_dropout && kind != c10::aten::feature_alpha_dropout) {
    return false;
  }
  if (n->inputs().size() < 3) return false;
  const c10::optional<c10::IValue> p = torch::jit::toIValue(n->input(1));
  const c10::optional<c10::IValue> train = torch::jit::toIValue(n->input(2));
  if (train && train->isBool() && !train->toBool()) return true;
  return p && p->isDouble() && p->toDouble() == 0.0;
}

using pure_graph::ForEachNode;
using pure_graph::KeyOf;
using pure_graph::Lifted;
using pure_graph::NodeString;
using pure_graph::PureGraph;
using pure_graph::StorageKey;
using pure_graph::TensorName;
using pure_graph::TopLevel;
using decomposer_internal::ChooseCuts;

}  // namespace

// --- Building and running the vLayers ----------------------------------------

struct Decomposition::Impl {
  std::unique_ptr<PureGraph> pure;
  std::vector<std::shared_ptr<Graph>> graphs;
  std::vector<std::unique_ptr<torch::jit::GraphFunction>> functions;
};

Decomposition::Decomposition(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

Decomposition::~Decomposition() = default;

namespace {

// The longest common dotted prefix of the module paths of `names`.
std::string CommonScope(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  std::vector<std::string> common = absl::StrSplit(names.front(), '.');
  common.pop_back();
  for (const std::string& name : names) {
    std::vector<std::string> parts = absl::StrSplit(name, '.');
    parts.pop_back();
    size_t n = 0;
    while (n < common.size() && n < parts.size() && common[n] == parts[n]) ++n;
    common.resize(n);
  }
  return absl::StrJoin(common, ".");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Decomposition>> Decomposition::Create(
    const torch::jit::Module& model, const DecomposeOptions& options) {
  if (options.granularity < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "granularity must be 0 (per block) or a vLayer count, got ",
        options.granularity));
  }
  std::vector<std::string> arguments;
  HARMONY_ASSIGN_OR_RETURN(std::unique_ptr<PureGraph> pure,
                           pure_graph::MakePureGraph(model, options.output, &arguments));
  // Parameter elements per node, from the module's tensors.
  std::vector<int64_t> elements(pure->nodes.size(), 0);
  std::vector<int64_t> bytes(pure->nodes.size(), 0);
  std::vector<bool> reads_params(pure->nodes.size(), false);
  std::vector<bool> seen(pure->lifted.size(), false);
  std::function<void(Node*, int)> reads = [&](Node* n, int owner) {
    for (Value* v : n->inputs()) {
      auto it = pure->lifted_index.find(v);
      if (it == pure->lifted_index.end()) continue;
      const Lifted& lifted = pure->lifted[it->second];
      if (!lifted.is_parameter) continue;
      reads_params[owner] = true;
      if (seen[it->second]) continue;
      seen[it->second] = true;
      absl::StatusOr<at::Tensor> t = ResolveTensor(model, lifted.name);
      if (t.ok()) {
        elements[owner] += t->numel();
        bytes[owner] += static_cast<int64_t>(t->nbytes());
      }
    }
    for (Block* b : n->blocks()) {
      for (Node* inner : b->nodes()) reads(inner, owner);
    }
  };
  for (size_t i = 0; i < pure->nodes.size(); ++i) {
    reads(pure->nodes[i], static_cast<int>(i));
  }
  std::vector<int> cuts = ChooseCuts(*pure, elements, bytes, reads_params, options.granularity,
                                     options.max_vlayer_weight_bytes, options.split_blocks);
  std::unique_ptr<Decomposition> d(new Decomposition(std::make_unique<Impl>()));
  d->impl_->pure = std::move(pure);
  d->forward_arguments_ = std::move(arguments);
  HARMONY_RETURN_IF_ERROR(d->BuildVLayers(cuts));
  return d;
}

absl::StatusOr<std::unique_ptr<Decomposition>> Decomposition::CreateWithCuts(
    const torch::jit::Module& model, const std::vector<int>& cut_points,
    const std::string& output) {
  std::vector<std::string> arguments;
  HARMONY_ASSIGN_OR_RETURN(std::unique_ptr<PureGraph> pure,
                           pure_graph::MakePureGraph(model, output, &arguments));
  const int count = static_cast<int>(pure->nodes.size());
  if (cut_points.empty() || cut_points.front() != 0) {
    return absl::InvalidArgumentError(
        "cut points must start at node 0 (the plan's decomposition is "
        "malformed)");
  }
  for (size_t i = 0; i < cut_points.size(); ++i) {
    const int c = cut_points[i];
    if (c >= count || (i > 0 && c <= cut_points[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cut point ", i, " is ", c,
          ": cut points must increase and stay below the model's ", count,
          " nodes (is the plan for another model?)"));
    }
    if (pure->forbidden_cut[c]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cut point ", i, " at node ", c, " cannot be cut: ", pure->cut_blocker[c],
          " (is the plan for another model, or from an older harmony-plan?)"));
    }
  }
  std::unique_ptr<Decomposition> d(new Decomposition(std::make_unique<Impl>()));
  d->impl_->pure = std::move(pure);
  d->forward_arguments_ = std::move(arguments);
  HARMONY_RETURN_IF_ERROR(d->BuildVLayers(cut_points));
  return d;
}

absl::Status Decomposition::BuildVLayers(const std::vector<int>& cuts) {
  PureGraph& pure = *impl_->pure;
  Graph& graph = *pure.graph;
  const Block* top = graph.block();
  const int count = static_cast<int>(pure.nodes.size());
  const int k_count = static_cast<int>(cuts.size());
  cut_points_ = cuts;
  num_nodes_ = count;
  auto vlayer_of = [&](int node) {
    return static_cast<int>(std::upper_bound(cuts.begin(), cuts.end(), node) -
                            cuts.begin()) - 1;
  };

  // Outputs of each vLayer: its top-level values used by a later vLayer or
  // returned by forward, in definition order.
  std::vector<std::vector<Value*>> outputs(k_count);
  std::unordered_map<const Value*, std::pair<int, int>> produced;
  for (int i = 0; i < count; ++i) {
    const int k = vlayer_of(i);
    for (Value* v : pure.nodes[i]->outputs()) {
      bool escapes = false;
      for (const torch::jit::Use& use : v->uses()) {
        if (use.user == graph.return_node()) {
          escapes = escapes || k != k_count - 1;
          continue;
        }
        Node* t = TopLevel(use.user, top);
        if (vlayer_of(pure.node_index.at(t)) != k) escapes = true;
      }
      if (escapes) {
        produced[v] = {k, static_cast<int>(outputs[k].size())};
        outputs[k].push_back(v);
      }
    }
  }

  vlayers_.clear();
  live_at_cuts_.clear();
  for (int k = 0; k < k_count; ++k) {
    const int begin = cuts[k];
    const int end = k + 1 < k_count ? cuts[k + 1] : count;
    if (k > 0) live_at_cuts_.push_back(pure.live_tensors[begin]);
    VLayerInfo info;
    info.index = k;
    info.node_begin = begin;
    info.node_end = end;
    auto g = std::make_shared<Graph>();
    std::unordered_map<Value*, Value*> env;
    std::vector<Value*> param_inputs, buffer_inputs, live_inputs;
    std::vector<Value*> param_src, buffer_src, live_src;
    // First pass: collect external values in order of first use.
    std::unordered_set<const Value*> seen;
    std::function<void(Node*)> collect = [&](Node* n) {
      for (Value* v : n->inputs()) {
        if (seen.count(v)) continue;
        Node* def = v->node();
        if (def->kind() == c10::prim::Constant) continue;
        auto lifted = pure.lifted_index.find(v);
        if (lifted != pure.lifted_index.end()) {
          seen.insert(v);
          (pure.lifted[lifted->second].is_parameter ? param_src : buffer_src)
              .push_back(v);
          continue;
        }
        if (def == graph.param_node()) {
          seen.insert(v);
          live_src.push_back(v);
          continue;
        }
        if (def->owningBlock() == top) {
          const int d = pure.node_index.at(def);
          if (d < begin) {
            seen.insert(v);
            live_src.push_back(v);
          }
        }
      }
      for (Block* b : n->blocks()) {
        for (Node* inner : b->nodes()) collect(inner);
        collect(b->return_node());  // A block's results are reads too.
      }
    };
    for (int i = begin; i < end; ++i) collect(pure.nodes[i]);
    if (k == k_count - 1) collect(graph.return_node());

    for (Value* v : param_src) {
      Value* in = g->addInput(pure.lifted[pure.lifted_index.at(v)].name);
      in->setType(v->type());
      env[v] = in;
      info.parameters.push_back(pure.lifted[pure.lifted_index.at(v)].name);
    }
    for (Value* v : buffer_src) {
      Value* in = g->addInput(pure.lifted[pure.lifted_index.at(v)].name);
      in->setType(v->type());
      env[v] = in;
      info.buffers.push_back(pure.lifted[pure.lifted_index.at(v)].name);
    }
    for (Value* v : live_src) {
      Value* in = g->addInput();
      in->setType(v->type());
      env[v] = in;
      ValueSource source;
      if (v->node() == graph.param_node()) {
        source.producer = -1;
        source.index = static_cast<int>(v->offset());
      } else {
        auto it = produced.find(v);
        if (it == produced.end()) {
          return absl::InternalError(absl::StrCat(
              "vLayer ", k, " reads a value no vLayer exports: ",
              NodeString(v->node())));
        }
        source.producer = it->second.first;
        source.index = it->second.second;
      }
      info.inputs.push_back(source);
    }
    auto value_map = [&](Value* v) -> Value* {
      auto it = env.find(v);
      if (it != env.end()) return it->second;
      if (v->node()->kind() == c10::prim::Constant) {
        Node* c = g->createClone(v->node(), [](Value* x) { return x; });
        g->prependNode(c);
        env[v] = c->output();
        return c->output();
      }
      TORCH_INTERNAL_ASSERT(false, "unmapped value ", v->debugName());
      return nullptr;
    };
    for (int i = begin; i < end; ++i) {
      Node* n = pure.nodes[i];
      Node* clone = g->createClone(n, value_map);
      g->insertNode(clone);
      for (size_t o = 0; o < n->outputs().size(); ++o) {
        env[n->outputs()[o]] = clone->outputs()[o];
      }
    }
    std::vector<Value*> outs = outputs[k];
    if (k == k_count - 1) {
      outs.clear();
      for (Value* v : graph.outputs()) outs.push_back(v);
    }
    // A GraphFunction returns one value: several outputs travel as a tuple.
    std::vector<Value*> mapped;
    for (Value* v : outs) {
      mapped.push_back(value_map(v));
      info.output_is_tensor.push_back(
          static_cast<bool>(v->type()->cast<c10::TensorType>()));
    }
    if (mapped.size() == 1) {
      g->registerOutput(mapped.front());
    } else {
      g->registerOutput(g->insertNode(g->createTuple(mapped))->output());
    }
    // Randomness and in-place buffer writes. BatchNorm updates its running
    // statistics without declaring it in its schema, so it is named here.
    // Dropout draws from the running thread's generator (common/dropout.h);
    // any other random op from LibTorch's global one.
    std::vector<Node*> dropouts;
    ForEachNode(g->block(), [&](Node* n) {
      if (!n->isNondeterministic() || DrawsNothing(n)) return;
      info.uses_rng = true;
      if (n->kind() == c10::aten::dropout && n->inputs().size() == 3) {
        dropouts.push_back(n);
      } else {
        info.global_rng = true;
      }
    });
    for (Node* n : dropouts) {
      Node* own = g->create(c10::Symbol::fromQualString(DropoutOp()), n->inputs(), 1);
      own->insertBefore(n);
      own->output()->setType(n->output()->type());
      n->output()->replaceAllUsesWith(own->output());
      n->destroy();
    }
    for (size_t b = 0; b < info.buffers.size(); ++b) {
      Value* buffer = g->inputs()[info.parameters.size() + b];
      for (const torch::jit::Use& use : buffer->uses()) {
        const Node* user = use.user;
        const auto kind = user->kind();
        if (kind == c10::aten::batch_norm ||
            kind == c10::aten::native_batch_norm ||
            kind == c10::aten::instance_norm) {
          info.updates_buffers = true;
        }
        if (const c10::FunctionSchema* schema = user->maybeSchema()) {
          if (use.offset < schema->arguments().size()) {
            const auto* alias = schema->arguments()[use.offset].alias_info();
            if (alias != nullptr && alias->isWrite()) info.updates_buffers = true;
          }
        }
      }
    }
    info.scope = CommonScope(info.parameters);
    vlayers_.push_back(std::move(info));
    impl_->graphs.push_back(g);
    impl_->functions.push_back(std::make_unique<torch::jit::GraphFunction>(
        absl::StrCat("vlayer_", k), g, nullptr));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<c10::IValue>> Decomposition::Run(
    int k, const std::vector<at::Tensor>& parameters,
    const std::vector<at::Tensor>& buffers,
    const std::vector<c10::IValue>& inputs) const {
  if (k < 0 || k >= num_vlayers()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vLayer ", k, " does not exist (there are ", num_vlayers(), ")"));
  }
  const VLayerInfo& info = vlayers_[k];
  if (parameters.size() != info.parameters.size() ||
      buffers.size() != info.buffers.size() ||
      inputs.size() != info.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vLayer ", k, " takes ", info.parameters.size(), " parameters, ",
        info.buffers.size(), " buffers and ", info.inputs.size(),
        " inputs; got ", parameters.size(), ", ", buffers.size(), " and ",
        inputs.size()));
  }
  torch::jit::Stack stack;
  stack.reserve(parameters.size() + buffers.size() + inputs.size());
  for (const at::Tensor& t : parameters) stack.emplace_back(t);
  for (const at::Tensor& t : buffers) stack.emplace_back(t);
  for (const c10::IValue& v : inputs) stack.push_back(v);
  HARMONY_RETURN_IF_ERROR(CallTorch(absl::StrCat("running vLayer ", k), [&] {
    torch::jit::GraphOptimizerEnabledGuard unoptimised(false);
    impl_->functions[k]->run(stack);
  }));
  if (info.num_outputs() == 1) return std::vector<c10::IValue>{stack.at(0)};
  return stack.at(0).toTupleRef().elements().vec();
}

std::string Decomposition::GraphText(int k) const {
  if (k < 0 || k >= num_vlayers()) return "";
  return impl_->graphs[k]->toString();
}

std::string Decomposition::NodeText(int i) const {
  const PureGraph& pure = *impl_->pure;
  if (i < 0 || i >= static_cast<int>(pure.nodes.size())) return "";
  return absl::StrCat(i, " ", pure.nodes[i]->kind().toQualString(), " [",
                      absl::StrJoin(pure.frames[i], " > "), "] live-before=",
                      pure.live_tensors[i],
                      pure.forbidden_cut[i] ? " no-cut" : "");
}

absl::StatusOr<at::Tensor> ResolveTensor(const torch::jit::Module& model,
                                         const std::string& qualified_name) {
  std::vector<std::string> parts = absl::StrSplit(qualified_name, '.');
  c10::IValue current = model._ivalue();
  for (const std::string& part : parts) {
    if (!current.isObject()) break;
    auto obj = current.toObject();
    if (!obj->type()->hasAttribute(part)) {
      return absl::NotFoundError(
          absl::StrCat("the model has no tensor ", qualified_name));
    }
    current = obj->getAttr(part);
  }
  if (!current.isTensor()) {
    return absl::NotFoundError(
        absl::StrCat("the model has no tensor ", qualified_name));
  }
  return current.toTensor();
}

std::map<std::string, std::string> TensorAliases(const torch::jit::Module& model) {
  const std::map<StorageKey, TensorName> canonical = pure_graph::CanonicalNames(model);
  std::map<std::string, std::string> aliases;
  auto add = [&](const std::string& name, const at::Tensor& t) {
    if (!t.defined()) return;
    auto it = canonical.find(KeyOf(t));
    if (it != canonical.end()) aliases.emplace(name, it->second.name);
  };
  for (const auto& p : model.named_parameters(true)) add(p.name, p.value);
  for (const auto& b : model.named_buffers(true)) add(b.name, b.value);
  return aliases;
}

absl::StatusOr<std::vector<at::Tensor>> ResolveTensors(
    const torch::jit::Module& model, const std::vector<std::string>& names) {
  std::vector<at::Tensor> tensors;
  tensors.reserve(names.size());
  for (const std::string& name : names) {
    HARMONY_ASSIGN_OR_RETURN(at::Tensor t, ResolveTensor(model, name));
    tensors.push_back(std::move(t));
  }
  return tensors;
}

}  // namespace harmony::common
