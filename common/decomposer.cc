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
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/model_output.h"
#include "common/status.h"
#include "common/torch_status.h"

namespace harmony::common {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

namespace {

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
  // Tensor values live at each position (def < p <= last use).
  std::vector<int> live_tensors;
  // Call-site frame keys of each node, outermost first.
  std::vector<std::vector<std::string>> frames;
};

absl::Status Unsupported(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("cannot decompose this model: ", what));
}

std::string NodeString(const Node* n) {
  std::ostringstream out;
  out << *n;
  std::string text = out.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.pop_back();
  }
  return text;
}

// The top-level node (a node of the graph's own block) that contains `n`.
Node* TopLevel(Node* n, const Block* top) {
  while (n->owningBlock() != top) n = n->owningBlock()->owningNode();
  return n;
}

// Visits every node in `block` and in the blocks nested inside it.
void ForEachNode(Block* block, const std::function<void(Node*)>& fn) {
  for (Node* n : block->nodes()) {
    fn(n);
    for (Block* b : n->blocks()) ForEachNode(b, fn);
  }
}

// Where a tensor's elements live: two attributes with the same key are one
// tensor (a tied weight: `lm_head.weight = wte.weight`, or an LSTM's
// `_flat_weights` list, which holds its parameters), even where loading a
// saved module made two tensor objects over one storage.
using StorageKey = std::tuple<const void*, int64_t, std::vector<int64_t>,
                              std::vector<int64_t>, int>;

StorageKey KeyOf(const at::Tensor& t) {
  return StorageKey(t.storage().unsafeGetStorageImpl(), t.storage_offset(),
                    t.sizes().vec(), t.strides().vec(),
                    static_cast<int>(t.scalar_type()));
}

struct TensorName {
  std::string name;
  bool is_parameter = false;
};

// The name of every parameter and buffer, by storage: the first under which
// named_parameters() (then named_buffers()) lists it, as PyTorch names a tied
// weight once, under its first name.
std::map<StorageKey, TensorName> CanonicalNames(const torch::jit::Module& model) {
  std::map<StorageKey, TensorName> names;
  for (const auto& p : model.named_parameters(/*recurse=*/true)) {
    if (p.value.defined()) names.emplace(KeyOf(p.value), TensorName{p.name, true});
  }
  for (const auto& b : model.named_buffers(/*recurse=*/true)) {
    if (b.value.defined()) names.emplace(KeyOf(b.value), TensorName{b.name, false});
  }
  return names;
}

// Replaces parameter/buffer reads with graph inputs and other attribute
// reads with constants; removes `self`. A list of parameters (an RNN's
// `_flat_weights`) becomes a list built from the parameters' inputs.
absl::Status LiftAttributes(const torch::jit::Module& model, PureGraph& pure) {
  Graph& graph = *pure.graph;
  Value* self = graph.inputs().at(0);
  std::unordered_map<const Value*, c10::IValue> objects{{self, model._ivalue()}};
  std::unordered_map<const Value*, std::string> paths{{self, ""}};
  std::map<std::string, size_t> lifted_by_name;
  const std::map<StorageKey, TensorName> canonical = CanonicalNames(model);
  std::vector<Node*> dead;
  absl::Status status;
  // The graph input of the tensor `t`, read at `path`: one per tensor,
  // named as CanonicalNames says (or by `path` when no parameter or buffer
  // holds it).
  auto lift = [&](const at::Tensor& t, const std::string& path, bool is_parameter) {
    TensorName name{path, is_parameter};
    auto known = canonical.find(KeyOf(t));
    if (known != canonical.end()) name = known->second;
    auto found = lifted_by_name.find(name.name);
    if (found == lifted_by_name.end()) {
      Lifted lifted;
      lifted.name = name.name;
      lifted.is_parameter = name.is_parameter;
      lifted.input = graph.addInput(name.name);
      lifted.input->setType(c10::TensorType::get());
      found = lifted_by_name.emplace(name.name, pure.lifted.size()).first;
      pure.lifted.push_back(lifted);
    }
    return pure.lifted[found->second].input;
  };

  ForEachNode(graph.block(), [&](Node* n) {
    if (!status.ok()) return;
    if (n->kind() == c10::prim::SetAttr) {
      status = Unsupported(absl::StrCat(
          "forward assigns to self.", n->s(c10::attr::name),
          " (in-place updates such as BatchNorm's are fine; assigning a new "
          "value to a module attribute is not): ",
          NodeString(n)));
      return;
    }
    if (n->kind() != c10::prim::GetAttr) return;
    auto it = objects.find(n->input(0));
    if (it == objects.end()) {
      status = Unsupported(absl::StrCat(
          "attribute read from something other than a module: ", NodeString(n)));
      return;
    }
    const std::string name = n->s(c10::attr::name);
    const std::string& parent = paths.at(n->input(0));
    const std::string path = parent.empty() ? name : parent + "." + name;
    c10::intrusive_ptr<c10::ivalue::Object> obj = it->second.toObject();
    c10::IValue value = obj->getAttr(name);
    Value* out = n->output();
    dead.push_back(n);
    if (value.isObject()) {
      objects.emplace(out, value);
      paths.emplace(out, path);
      return;
    }
    if (value.isTensor()) {
      const c10::ClassTypePtr& cls = obj->type();
      out->replaceAllUsesWith(
          lift(value.toTensor(), path, cls->is_parameter(cls->getAttributeSlot(name))));
      return;
    }
    if (value.isTensorList()) {
      // Built where the list was read, in the same module call, so the
      // list (which cannot cross a cut) stays with its reader.
      std::vector<Value*> elements;
      for (const at::Tensor& t : value.toTensorVector()) {
        if (!t.defined() || canonical.count(KeyOf(t)) == 0) {
          status = Unsupported(absl::StrCat(
              "attribute ", path, " is a list holding a tensor that is neither a "
              "parameter nor a buffer of the model"));
          return;
        }
        elements.push_back(lift(t, path, false));
      }
      torch::jit::WithInsertPoint guard(n);
      Node* list = graph.insertNode(graph.createList(c10::TensorType::get(), elements));
      if (n->callstack()) list->setCallStack(*n->callstack());
      list->setSourceRange(n->sourceRange());
      out->replaceAllUsesWith(list->output());
      return;
    }
    torch::jit::WithInsertPoint guard(*graph.nodes().begin());
    c10::optional<Value*> constant = torch::jit::tryInsertConstant(graph, value);
    if (!constant) {
      status = Unsupported(absl::StrCat("attribute ", path, " of type ",
                                        value.type()->str(),
                                        " cannot be used as a constant"));
      return;
    }
    out->replaceAllUsesWith(*constant);
  });
  HARMONY_RETURN_IF_ERROR(status);

  for (auto it = dead.rbegin(); it != dead.rend(); ++it) {
    Node* n = *it;
    if (n->output()->hasUses()) {
      return Unsupported(absl::StrCat(
          "a module is used as a value (only attribute reads and method calls "
          "are supported): ",
          NodeString(n->output()->uses().front().user)));
    }
    n->destroy();
  }
  if (self->hasUses()) {
    return Unsupported(absl::StrCat("forward uses self directly: ",
                                    NodeString(self->uses().front().user)));
  }
  graph.eraseInput(0);
  pure.num_data_inputs =
      static_cast<int>(graph.inputs().size() - pure.lifted.size());
  for (size_t i = 0; i < pure.lifted.size(); ++i) {
    pure.lifted_index.emplace(pure.lifted[i].input, static_cast<int>(i));
  }
  return absl::OkStatus();
}

// The call-site frames of a node: "instance@function:offset", outermost
// first. Equal prefixes mean the nodes came from the same module call.
std::vector<std::string> FramesOf(const Node* n) {
  std::vector<std::string> frames;
  c10::optional<torch::jit::InlinedCallStackPtr> cs = n->callstack();
  if (!cs) return frames;
  for (const auto& entry : (*cs)->vec()) {
    const auto& instance = std::get<2>(entry);
    const auto& range = std::get<1>(entry);
    frames.push_back(absl::StrCat(instance ? instance->instance_name() : "",
                                  "@", range.start(), "-", range.end()));
  }
  return frames;
}

// The value `v` is a view or in-place result of, following schema alias
// annotations (aten::view(Tensor(a) self) -> Tensor(a), add_ -> (a!)).
const Value* AliasBase(const Value* v) {
  while (true) {
    const Node* producer = v->node();
    const c10::FunctionSchema* schema = producer->maybeSchema();
    if (schema == nullptr || v->offset() >= schema->returns().size()) return v;
    const auto* out_alias = schema->returns()[v->offset()].alias_info();
    if (out_alias == nullptr) return v;
    const Value* next = nullptr;
    for (size_t i = 0; i < schema->arguments().size() && i < producer->inputs().size(); ++i) {
      const auto* in_alias = schema->arguments()[i].alias_info();
      if (in_alias != nullptr && in_alias->beforeSets() == out_alias->beforeSets()) {
        next = producer->input(i);
        break;
      }
    }
    if (next == nullptr) return v;
    v = next;
  }
}

// A Tensor, or an Optional[Tensor] (a tensor or None when it runs): what
// may cross a cut, with gradients flowing back through it.
bool IsTensorLike(const c10::TypePtr& type) {
  if (type->cast<c10::TensorType>()) return true;
  if (auto optional = type->cast<c10::OptionalType>()) {
    return static_cast<bool>(optional->getElementType()->cast<c10::TensorType>());
  }
  return false;
}

bool ContainsTensor(const c10::TypePtr& type) {
  if (type->cast<c10::TensorType>()) return true;
  for (const c10::TypePtr& contained : type->containedTypes()) {
    if (ContainsTensor(contained)) return true;
  }
  return false;
}

void Analyse(PureGraph& pure) {
  Graph& graph = *pure.graph;
  const Block* top = graph.block();
  for (Node* n : graph.nodes()) {
    if (n->kind() == c10::prim::Constant) continue;
    pure.node_index.emplace(n, static_cast<int>(pure.nodes.size()));
    pure.nodes.push_back(n);
  }
  const int count = static_cast<int>(pure.nodes.size());
  pure.frames.resize(count);
  for (int i = 0; i < count; ++i) pure.frames[i] = FramesOf(pure.nodes[i]);
  // Some inlined nodes carry no call stack (the prim::If of BatchNorm's
  // `if self.training:`). Such a node belongs to whatever call surrounds it:
  // the common prefix of its neighbours' frames.
  std::vector<std::vector<std::string>> inferred = pure.frames;
  for (int i = 0; i < count; ++i) {
    if (!pure.frames[i].empty()) continue;
    int before = i - 1, after = i + 1;
    while (before >= 0 && pure.frames[before].empty()) --before;
    while (after < count && pure.frames[after].empty()) ++after;
    if (before < 0 || after >= count) continue;
    const auto& a = pure.frames[before];
    const auto& b = pure.frames[after];
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    inferred[i].assign(a.begin(), a.begin() + n);
  }
  pure.frames = std::move(inferred);

  // Definition and last use (as top-level positions) of every tensor value
  // that can cross a cut: forward's data arguments and top-level outputs.
  // Graph outputs are used at position `count`.
  pure.live_tensors.assign(count + 1, 0);
  auto last_use = [&](const Value* v) {
    int last = -1;
    for (const torch::jit::Use& use : v->uses()) {
      const Node* user = use.user;
      if (user == graph.return_node()) {
        last = std::max(last, count);
        continue;
      }
      Node* t = TopLevel(const_cast<Node*>(user), top);
      auto it = pure.node_index.find(t);
      if (it != pure.node_index.end()) last = std::max(last, it->second);
    }
    return last;
  };
  auto mark_live = [&](const Value* v, int def) {
    if (!IsTensorLike(v->type())) return;
    const int last = last_use(v);
    for (int p = def + 1; p <= last; ++p) pure.live_tensors[p]++;
  };
  for (int i = 0; i < pure.num_data_inputs; ++i) {
    mark_live(graph.inputs()[i], -1);
  }
  for (int i = 0; i < count; ++i) {
    for (const Value* v : pure.nodes[i]->outputs()) mark_live(v, i);
  }

  // A cut may not carry tensors inside other values (a List[Tensor] from
  // split, a tuple): gradients flow back across cuts only through tensors.
  pure.forbidden_cut.assign(count + 1, false);
  for (int i = 0; i < count; ++i) {
    for (const Value* v : pure.nodes[i]->outputs()) {
      if (IsTensorLike(v->type()) || !ContainsTensor(v->type())) continue;
      const int last = last_use(v);
      for (int p = i + 1; p <= last && p <= count; ++p) {
        pure.forbidden_cut[p] = true;
      }
    }
  }
  // Nor separate a value from a later in-place write to it (or to a view of
  // it): the recompute would write to a copy. Writes to buffers are fine
  // (buffers are passed to every vLayer that reads them).
  for (int q = 0; q < count; ++q) {
    Node* top_node = pure.nodes[q];
    std::function<void(Node*)> check = [&](Node* n) {
      if (const c10::FunctionSchema* schema = n->maybeSchema()) {
        for (size_t i = 0; i < schema->arguments().size() && i < n->inputs().size(); ++i) {
          const auto* alias = schema->arguments()[i].alias_info();
          if (alias == nullptr || !alias->isWrite()) continue;
          const Value* base = AliasBase(n->input(i));
          if (pure.lifted_index.count(base)) continue;
          int def = -1;
          if (base->node() != graph.param_node()) {
            if (base->node()->owningBlock() != top) continue;  // Local.
            auto it = pure.node_index.find(base->node());
            if (it == pure.node_index.end()) continue;
            def = it->second;
          }
          for (int p = def + 1; p <= q; ++p) pure.forbidden_cut[p] = true;
        }
      }
      for (Block* b : n->blocks()) {
        for (Node* inner : b->nodes()) check(inner);
      }
    };
    check(top_node);
  }
  pure.forbidden_cut[0] = false;
}

// Makes the graph return the element `selector` of forward's output (an
// index, a dict key or a NamedTuple field) instead of the whole tuple, list
// or dict; an empty selector keeps the output, which must be a tensor.
absl::Status SelectOutput(Graph& graph, const std::string& selector) {
  Value* out = graph.outputs().at(0);
  const c10::TypePtr type = out->type();
  if (selector.empty()) {
    if (type->cast<c10::TensorType>()) return absl::OkStatus();
    return Unsupported(absl::StrCat(
        "forward returns ", type->annotation_str(),
        ", not a tensor; name the element to train on (--loss-output)"));
  }
  HARMONY_ASSIGN_OR_RETURN(OutputElement element, FindOutputElement(type, selector));
  Node* producer = out->node();
  Value* picked = nullptr;
  torch::jit::WithInsertPoint guard(graph.return_node());
  if (type->cast<c10::TupleType>()) {
    if (producer->kind() == c10::prim::TupleConstruct) {
      picked = producer->input(element.index);
    } else {
      picked = graph.insertNode(graph.createTupleIndex(
                                    out, graph.insertConstant(element.index),
                                    type->containedTypes().at(element.index)))
                   ->output();
    }
  } else if (type->cast<c10::ListType>()) {
    if (producer->kind() == c10::prim::ListConstruct &&
        element.index < static_cast<int>(producer->inputs().size())) {
      picked = producer->input(element.index);
    } else {
      picked = graph.insert(c10::aten::__getitem__, {out, element.index});
    }
  } else {  // A dict.
    if (producer->kind() == c10::prim::DictConstruct) {
      for (size_t i = 0; i + 1 < producer->inputs().size(); i += 2) {
        c10::optional<c10::IValue> key = torch::jit::toIValue(producer->input(i));
        if (key && key->isString() && key->toStringRef() == element.key) {
          picked = producer->input(i + 1);
        }
      }
    }
    if (picked == nullptr) picked = graph.insert(c10::aten::__getitem__, {out, element.key});
  }
  graph.eraseOutput(0);
  graph.registerOutput(picked);
  if (!out->hasUses() && (producer->kind() == c10::prim::TupleConstruct ||
                          producer->kind() == c10::prim::ListConstruct ||
                          producer->kind() == c10::prim::DictConstruct)) {
    producer->destroy();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PureGraph>> MakePureGraph(
    const torch::jit::Module& model, const std::string& output,
    std::vector<std::string>* arguments) {
  auto method = model.find_method("forward");
  if (!method) {
    std::vector<std::string> names;
    for (const auto& m : model.get_methods()) names.push_back(m.name());
    return absl::InvalidArgumentError(absl::StrCat(
        "the model has no forward method (methods: ",
        names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
  }
  const auto& schema_args = method->function().getSchema().arguments();
  for (size_t i = 1; i < schema_args.size(); ++i) {
    arguments->push_back(schema_args[i].name());
  }
  auto pure = std::make_unique<PureGraph>();
  HARMONY_RETURN_IF_ERROR(CallTorch("preparing forward's graph", [&] {
    pure->graph = method->graph()->copy();
    torch::jit::Inline(*pure->graph);
  }));
  absl::Status selected;
  HARMONY_RETURN_IF_ERROR(CallTorch("choosing forward's output", [&] {
    selected = SelectOutput(*pure->graph, output);
  }));
  HARMONY_RETURN_IF_ERROR(selected);
  HARMONY_RETURN_IF_ERROR(LiftAttributes(model, *pure));
  HARMONY_RETURN_IF_ERROR(CallTorch("analysing forward's graph", [&] {
    Analyse(*pure);
  }));
  if (pure->nodes.empty()) {
    return absl::InvalidArgumentError("forward computes nothing");
  }
  return pure;
}

// --- Choosing cut points ----------------------------------------------------

struct Unit {
  int begin = 0;
  int end = 0;
  int depth = 0;          // Frames shared by all its call nodes.
  bool splittable = true;
};

int64_t Weight(const std::vector<int64_t>& elements, int begin, int end) {
  int64_t w = 0;
  for (int i = begin; i < end; ++i) w += elements[i] + 64;
  return w;
}

// Groups [begin, end) by the first `depth` frames: consecutive nodes from
// the same module call form one group; nodes not inside a call at that depth
// (glue) are groups of their own. Then parameter-free groups are merged into
// a neighbour, placing the boundary where the fewest tensors are live.
std::vector<Unit> SplitAtDepth(const PureGraph& pure,
                               const std::vector<bool>& reads_params, int begin,
                               int end, int depth) {
  auto key = [&](int i) -> std::string {
    const auto& f = pure.frames[i];
    if (static_cast<int>(f.size()) < depth) return "";
    return absl::StrJoin(f.begin(), f.begin() + depth, "/");
  };
  std::vector<Unit> groups;
  for (int i = begin; i < end; ++i) {
    const std::string k = key(i);
    if (!groups.empty() && !k.empty() && key(groups.back().begin) == k) {
      groups.back().end = i + 1;
    } else {
      groups.push_back(Unit{i, i + 1, depth, true});
    }
  }
  auto has_params = [&](const Unit& u) {
    for (int i = u.begin; i < u.end; ++i) {
      if (reads_params[i]) return true;
    }
    return false;
  };
  // Keep the groups with parameters; for each run of parameter-free groups
  // between two of them, cut at the boundary with the fewest live tensors
  // (the latest one on ties, so glue goes with the code before it).
  std::vector<int> anchors;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (has_params(groups[g])) anchors.push_back(static_cast<int>(g));
  }
  if (anchors.size() <= 1) {
    // One block (or none) at this depth; a deeper split may still exist.
    return {Unit{begin, end, depth, true}};
  }
  std::vector<int> cuts{begin};
  for (size_t a = 0; a + 1 < anchors.size(); ++a) {
    int best = groups[anchors[a + 1]].begin;
    int best_live = pure.live_tensors[best];
    for (int g = anchors[a] + 1; g <= anchors[a + 1]; ++g) {
      const int p = groups[g].begin;
      if (pure.forbidden_cut[p]) continue;
      if (pure.live_tensors[p] <= best_live || pure.forbidden_cut[best]) {
        best = p;
        best_live = pure.live_tensors[p];
      }
    }
    if (!pure.forbidden_cut[best]) cuts.push_back(best);
  }
  std::vector<Unit> units;
  for (size_t c = 0; c < cuts.size(); ++c) {
    const int e = c + 1 < cuts.size() ? cuts[c + 1] : end;
    units.push_back(Unit{cuts[c], e, depth, true});
  }
  return units;
}

// `elements`: parameter elements first read by each node (for balancing);
// `reads_params`: whether a node reads any parameter (for grouping).
std::vector<int> ChooseCuts(const PureGraph& pure,
                            const std::vector<int64_t>& elements,
                            const std::vector<bool>& reads_params,
                            int granularity) {
  const int count = static_cast<int>(pure.nodes.size());
  int64_t total = 0;
  for (int64_t e : elements) total += e;
  std::vector<Unit> units = SplitAtDepth(pure, reads_params, 0, count, 1);

  auto params_of = [&](const Unit& u) {
    int64_t p = 0;
    for (int i = u.begin; i < u.end; ++i) p += elements[i];
    return p;
  };
  // Split `units[i]` one level deeper; false when that changes nothing.
  auto split = [&](size_t i) {
    Unit u = units[i];
    int max_depth = 0;
    for (int n = u.begin; n < u.end; ++n) {
      max_depth = std::max(max_depth, static_cast<int>(pure.frames[n].size()));
    }
    for (int depth = u.depth + 1; depth <= max_depth + 1; ++depth) {
      std::vector<Unit> parts =
          SplitAtDepth(pure, reads_params, u.begin, u.end, depth);
      if (parts.size() > 1) {
        units.erase(units.begin() + i);
        units.insert(units.begin() + i, parts.begin(), parts.end());
        return true;
      }
    }
    units[i].splittable = false;
    return false;
  };

  // Open up any block that holds more than half of the parameters (a
  // top-level `encoder` or `layers` container).
  while (true) {
    size_t heaviest = 0;
    for (size_t i = 1; i < units.size(); ++i) {
      if (params_of(units[i]) > params_of(units[heaviest])) heaviest = i;
    }
    if (units.size() == 0 || !units[heaviest].splittable ||
        params_of(units[heaviest]) * 2 <= total || !split(heaviest)) {
      break;
    }
  }
  if (granularity > 0) {
    while (static_cast<int>(units.size()) < granularity) {
      int best = -1;
      for (size_t i = 0; i < units.size(); ++i) {
        if (!units[i].splittable) continue;
        if (best < 0 || Weight(elements, units[i].begin, units[i].end) >
                            Weight(elements, units[best].begin,
                                   units[best].end)) {
          best = static_cast<int>(i);
        }
      }
      if (best < 0) break;
      split(best);
    }
    while (static_cast<int>(units.size()) > granularity) {
      size_t best = 0;
      int64_t best_weight = -1;
      for (size_t i = 0; i + 1 < units.size(); ++i) {
        const int64_t w =
            Weight(elements, units[i].begin, units[i + 1].end);
        if (best_weight < 0 || w < best_weight) {
          best = i;
          best_weight = w;
        }
      }
      units[best].end = units[best + 1].end;
      units[best].depth = std::min(units[best].depth, units[best + 1].depth);
      units.erase(units.begin() + best + 1);
    }
  }
  std::vector<int> cuts;
  for (const Unit& u : units) {
    if (cuts.empty() || !pure.forbidden_cut[u.begin]) cuts.push_back(u.begin);
  }
  return cuts;
}

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
                           MakePureGraph(model, options.output, &arguments));
  // Parameter elements per node, from the module's tensors.
  std::vector<int64_t> elements(pure->nodes.size(), 0);
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
      if (t.ok()) elements[owner] += t->numel();
    }
    for (Block* b : n->blocks()) {
      for (Node* inner : b->nodes()) reads(inner, owner);
    }
  };
  for (size_t i = 0; i < pure->nodes.size(); ++i) {
    reads(pure->nodes[i], static_cast<int>(i));
  }
  std::vector<int> cuts =
      ChooseCuts(*pure, elements, reads_params, options.granularity);
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
                           MakePureGraph(model, output, &arguments));
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
          "cut point ", i, " at node ", c,
          " separates a tensor from an in-place update of it"));
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
    ForEachNode(g->block(), [&](Node* n) {
      if (n->isNondeterministic()) info.uses_rng = true;
    });
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
  const std::map<StorageKey, TensorName> canonical = CanonicalNames(model);
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
