#include "common/pure_graph.h"

#include <sstream>
#include <unordered_set>

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/inliner.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model_output.h"
#include "common/status.h"
#include "common/graph_folding.h"
#include "common/tensor_lists.h"
#include "common/torch_status.h"

namespace harmony::common::pure_graph {

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

Node* TopLevel(Node* n, const Block* top) {
  while (n->owningBlock() != top) n = n->owningBlock()->owningNode();
  return n;
}

void ForEachNode(Block* block, const std::function<void(Node*)>& fn) {
  for (Node* n : block->nodes()) {
    fn(n);
    for (Block* b : n->blocks()) ForEachNode(b, fn);
  }
}

StorageKey KeyOf(const at::Tensor& t) {
  return StorageKey(t.storage().unsafeGetStorageImpl(), t.storage_offset(),
                    t.sizes().vec(), t.strides().vec(),
                    static_cast<int>(t.scalar_type()));
}

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

namespace {

// Replaces parameter/buffer reads with graph inputs and other attribute
// reads with constants; removes `self`. A list of parameters (an RNN's
// `_flat_weights`) becomes a list built from the parameters' inputs. A
// module's `training` becomes the output of a prim::Uninitialized node of
// `training` (one per value), for FoldConstants to put a constant in.
absl::Status LiftAttributes(const torch::jit::Module& model, PureGraph& pure,
                            std::map<bool, Node*>& training) {
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
    if (name == "training" && value.isBool()) {
      Node*& held = training[value.toBool()];
      if (held == nullptr) {
        held = graph.insertNode(graph.create(c10::prim::Uninitialized));
        held->output()->setType(c10::BoolType::get());
      }
      out->replaceAllUsesWith(held->output());
      return;
    }
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
  pure.cut_blocker.assign(count + 1, "");
  auto forbid = [&](int p, const std::string& why) {
    if (!pure.forbidden_cut[p]) pure.cut_blocker[p] = why;
    pure.forbidden_cut[p] = true;
  };
  for (int i = 0; i < count; ++i) {
    for (const Value* v : pure.nodes[i]->outputs()) {
      if (IsTensorLike(v->type()) || !ContainsTensor(v->type())) continue;
      const int last = last_use(v);
      const std::string why = absl::StrCat(
          "it would carry a ", v->type()->annotation_str(), " (made by node ", i, ": ",
          NodeString(pure.nodes[i]), "); only tensors, and values without tensors inside, "
          "cross cuts");
      for (int p = i + 1; p <= last && p <= count; ++p) forbid(p, why);
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
          const std::string why = absl::StrCat(
              "it would separate a tensor from an in-place update of it at node ", q, " (",
              NodeString(n), ")");
          for (int p = def + 1; p <= q; ++p) forbid(p, why);
        }
      }
      for (Block* b : n->blocks()) {
        for (Node* inner : b->nodes()) check(inner);
      }
    };
    check(top_node);
  }
  pure.forbidden_cut[0] = false;
  pure.cut_blocker[0].clear();
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

}  // namespace

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
  std::map<bool, Node*> training;
  HARMONY_RETURN_IF_ERROR(LiftAttributes(model, *pure, training));
  HARMONY_RETURN_IF_ERROR(CallTorch("analysing forward's graph", [&] {
    FoldConstants(*pure->graph, training);
    RebuildTensorLists(*pure->graph);
    Analyse(*pure);
  }));
  if (pure->nodes.empty()) {
    return absl::InvalidArgumentError("forward computes nothing");
  }
  return pure;
}

}  // namespace harmony::common::pure_graph
