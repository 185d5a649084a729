// Folding forward's graph before cuts are chosen (graph_folding.h).

#include "common/graph_folding.h"

#include <algorithm>
#include <string>
#include <vector>

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/passes/constant_propagation.h>

namespace harmony::common::pure_graph {
namespace {

// Whether values of `type` are immutable scalars a constant can stand for.
bool IsScalar(const c10::TypePtr& type) {
  return type->kind() == c10::TypeKind::BoolType || type->kind() == c10::TypeKind::IntType ||
         type->kind() == c10::TypeKind::FloatType || type->kind() == c10::TypeKind::StringType ||
         type->kind() == c10::TypeKind::NoneType;
}

// In `block` and the blocks inside it, in order: evaluates each node whose
// inputs are constants and whose outputs are scalars (`name in
// self.return_layers`), and replaces each prim::If on a constant with the
// branch it takes. Nothing else goes: no dead-code elimination, which would
// drop a BatchNorm whose output nobody reads along with its statistics.
void FoldBlock(Graph& graph, Block* block) {
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* n = *it;
    ++it;
    for (Block* inner : n->blocks()) FoldBlock(graph, inner);
    if (n->kind() == c10::prim::If) {
      c10::optional<c10::IValue> cond = torch::jit::toIValue(n->input(0));
      if (!cond || !cond->isBool()) continue;
      Block* taken = n->blocks()[cond->toBool() ? 0 : 1];
      for (auto m = taken->nodes().begin(); m != taken->nodes().end();) {
        Node* moved = *m;
        ++m;
        moved->moveBefore(n);
      }
      for (size_t i = 0; i < n->outputs().size(); ++i) {
        n->outputs()[i]->replaceAllUsesWith(taken->outputs()[i]);
      }
      n->destroy();
      continue;
    }
    if (n->kind() == c10::prim::Constant || n->kind() == c10::prim::Uninitialized ||
        n->inputs().empty() || n->outputs().empty() || !n->blocks().empty()) {
      continue;
    }
    bool scalar = true;
    for (const Value* v : n->outputs()) scalar = scalar && IsScalar(v->type());
    if (!scalar) continue;
    c10::optional<torch::jit::Stack> values = torch::jit::runNodeIfInputsAreConstant(n);
    if (!values || values->size() != n->outputs().size()) continue;
    std::vector<Value*> constants;
    torch::jit::WithInsertPoint guard(n);
    for (const c10::IValue& v : *values) {
      c10::optional<Value*> c = torch::jit::tryInsertConstant(graph, v);
      if (!c) break;
      constants.push_back(*c);
    }
    if (constants.size() != n->outputs().size()) {
      for (Value* c : constants) c->node()->destroy();
      continue;
    }
    for (size_t i = 0; i < constants.size(); ++i) {
      n->outputs()[i]->replaceAllUsesWith(constants[i]);
    }
    n->destroy();
  }
}

// Replaces a dict that forward only fills and reads at the top level, under
// constant keys (DeepLabV3's backbone features {"out", "aux"} and its own
// result), by the values themselves: a dict that holds a tensor may not
// cross a cut, and the aux feature is stored early and read at the end.
void ReplaceDicts(Graph& graph) {
  const Block* top = graph.block();
  auto key_of = [](const Node* n) -> c10::optional<std::string> {
    if (n->inputs().size() < 2) return c10::nullopt;
    c10::optional<c10::IValue> key = torch::jit::toIValue(n->input(1));
    if (!key || !key->isString()) return c10::nullopt;
    return key->toStringRef();
  };
  std::vector<Node*> dicts;
  for (Node* n : graph.nodes()) {
    if ((n->kind() == c10::aten::dict || n->kind() == c10::prim::DictConstruct) &&
        n->outputs().size() == 1 && n->output()->type()->cast<c10::DictType>()) {
      dicts.push_back(n);
    }
  }
  for (Node* d : dicts) {
    // The entries it is made with, under constant keys.
    std::map<std::string, Value*> initial;
    bool plain = d->kind() == c10::aten::dict ? d->inputs().empty() : true;
    for (size_t i = 0; plain && d->kind() == c10::prim::DictConstruct && i + 1 < d->inputs().size();
         i += 2) {
      c10::optional<c10::IValue> key = torch::jit::toIValue(d->input(i));
      plain = key && key->isString();
      if (plain) initial[key->toStringRef()] = d->input(i + 1);
    }
    std::vector<Node*> users;
    for (const torch::jit::Use& use : d->output()->uses()) {
      const Node* u = use.user;
      plain = plain && use.offset == 0 && u->owningBlock() == top && key_of(u) &&
              ((u->kind() == c10::aten::_set_item && u->inputs().size() == 3) ||
               (u->kind() == c10::aten::__getitem__ && u->outputs().size() == 1));
      users.push_back(use.user);
    }
    if (!plain) continue;
    std::sort(users.begin(), users.end(), [](Node* a, Node* b) { return a->isBefore(b); });
    std::map<std::string, Value*> entries = initial;
    for (Node* u : users) {
      if (u->kind() == c10::aten::__getitem__ && !entries.count(*key_of(u))) plain = false;
      if (u->kind() == c10::aten::_set_item) entries[*key_of(u)] = u->input(2);
    }
    if (!plain) continue;  // A read before its key is set: forward raises there.
    entries = initial;
    for (Node* u : users) {
      const std::string key = *key_of(u);
      if (u->kind() == c10::aten::_set_item) {
        entries[key] = u->input(2);
      } else {
        u->output()->replaceAllUsesWith(entries[key]);
      }
      u->destroy();
    }
    d->destroy();
  }
}

}  // namespace

void FoldConstants(Graph& graph, const std::map<bool, Node*>& training) {
  FoldBlock(graph, graph.block());
  for (const auto& [value, held] : training) {
    torch::jit::WithInsertPoint guard(*graph.nodes().begin());
    held->output()->replaceAllUsesWith(graph.insertConstant(value));
    held->destroy();
  }
  ReplaceDicts(graph);
  const Block* top = graph.block();
  std::vector<Node*> empty;
  for (Node* n : graph.nodes()) {
    const bool container = n->kind() == c10::aten::dict ||
                           n->kind() == c10::prim::DictConstruct ||
                           n->kind() == c10::prim::ListConstruct;
    if (container && n->inputs().empty() && n->outputs().size() == 1) empty.push_back(n);
  }
  for (Node* n : empty) {
    Node* first = nullptr;
    for (const torch::jit::Use& use : n->output()->uses()) {
      Node* t = TopLevel(use.user, top);
      if (first == nullptr || t->isBefore(first)) first = t;
    }
    if (first != nullptr && first != n->next()) n->moveBefore(first);
  }
}

}  // namespace harmony::common::pure_graph
