#include "common/tensor_lists.h"

#include <map>
#include <vector>

#include "common/pure_graph.h"

namespace harmony::common::pure_graph {
namespace {

using torch::jit::Use;  // Block, Graph, Node, Value: common/pure_graph.h.

bool IsTensorList(const Value* v) {
  const auto list = v->type()->cast<c10::ListType>();
  return list && list->getElementType()->cast<c10::TensorType>();
}

bool ContainsList(const c10::TypePtr& type) {
  if (type->cast<c10::ListType>()) return true;
  for (const c10::TypePtr& contained : type->containedTypes()) {
    if (ContainsList(contained)) return true;
  }
  return false;
}

// Whether every use of `list` is a top-level append or a read that neither
// writes to the list nor hands it on (see the header).
bool Rewritable(const Value* list, const Graph& graph) {
  const Block* top = graph.block();
  for (const Use& use : list->uses()) {
    const Node* user = use.user;
    if (user == graph.return_node() || user->kind() == c10::prim::Return) return false;
    if (user->kind() == c10::aten::append) {
      if (use.offset != 0 || user->owningBlock() != top || user->output()->hasUses()) return false;
      continue;
    }
    const c10::FunctionSchema* schema = user->maybeSchema();
    if (schema == nullptr) {
      if (user->kind() == c10::prim::ListUnpack) continue;
      return false;  // A container, a loop-carried value, a call: left alone.
    }
    if (use.offset < schema->arguments().size()) {
      const auto* alias = schema->arguments()[use.offset].alias_info();
      if (alias != nullptr && alias->isWrite()) return false;
    }
    for (size_t r = 0; r < schema->returns().size(); ++r) {
      if (schema->returns()[r].alias_info() != nullptr &&
          ContainsList(schema->returns()[r].type())) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

int RebuildTensorLists(Graph& graph) {
  Block* top = graph.block();
  std::vector<Node*> lists;
  for (Node* n : top->nodes()) {
    if (n->kind() == c10::prim::ListConstruct && IsTensorList(n->output())) lists.push_back(n);
  }
  int rewritten = 0;
  for (Node* made : lists) {
    Value* list = made->output();
    if (!list->hasUses() || !Rewritable(list, graph)) continue;
    // The readers' uses, by the top-level node that holds them.
    std::map<Node*, std::vector<Use>> reads;
    for (const Use& use : list->uses()) {
      if (use.user->kind() == c10::aten::append) continue;
      reads[TopLevel(use.user, top)].push_back(use);
    }
    std::vector<Value*> elements(made->inputs().begin(), made->inputs().end());
    std::vector<Node*> appends;
    for (Node* t = made->next(); t != top->return_node(); t = t->next()) {
      if (t->kind() == c10::aten::append && t->input(0) == list) {
        elements.push_back(t->input(1));
        appends.push_back(t);
        continue;
      }
      const auto here = reads.find(t);
      if (here == reads.end()) continue;
      torch::jit::WithInsertPoint guard(t);
      Node* fresh = graph.insertNode(graph.createList(c10::TensorType::get(), elements));
      if (t->callstack()) fresh->setCallStack(*t->callstack());
      fresh->setSourceRange(t->sourceRange());
      for (const Use& use : here->second) use.user->replaceInput(use.offset, fresh->output());
    }
    for (Node* a : appends) a->destroy();
    made->destroy();
    ++rewritten;
  }
  return rewritten;
}

}  // namespace harmony::common::pure_graph
