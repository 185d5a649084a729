// Which part of forward's output a model trains on.
//
// forward may return a tensor, or a tuple, list, Dict[str, Tensor] or
// NamedTuple of tensors (Hugging Face's `(loss, logits)`, torchvision
// GoogLeNet's NamedTuple, two heads). Training uses one tensor of it, named
// by a selector: an index ("0"), a dict key or a NamedTuple field ("loss").
// By default it is the first scalar tensor (a loss the model computed
// itself), else the first tensor (logits, to which a loss is applied).
//
// The planner chooses the selector (ChooseLossOutput) and records it in the
// plan; the decomposer makes the last vLayer return that element
// (DecomposeOptions::output) and reference loops running the whole module
// pick it with PickOutput, so all of them train on the same tensor.
//
// Thread-safety: stateless functions; ChooseLossOutput runs the module (see
// there).

#ifndef HARMONY_COMMON_MODEL_OUTPUT_H_
#define HARMONY_COMMON_MODEL_OUTPUT_H_

#include <string>
#include <vector>

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include "absl/status/statusor.h"

namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace harmony::common {

// An element of a tuple, list or dict type: `index` for tuples and lists,
// `key` for dicts; `label` names it for people ("element 0", "field
// 'logits'", "key 'loss'").
struct OutputElement {
  int index = -1;
  std::string key;
  std::string label;
};

// The element `selector` names in values of `type`. InvalidArgument when the
// type has no such element, the element is not a tensor, or the type is not
// a tuple, list or dict; the message lists what there is.
absl::StatusOr<OutputElement> FindOutputElement(const c10::TypePtr& type,
                                                const std::string& selector);

struct OutputChoice {
  std::string selector;  // Empty: forward returns a tensor.
  std::string message;   // What was chosen and why, for people; may be empty.
};

// Chooses the element of `model`'s forward output to train on: `requested`
// if not empty (checked against forward's return type), otherwise the first
// scalar tensor of forward's output on `sample_args` (run once in eval mode
// without gradients, then the mode is restored), else its first tensor. With
// no sample_args the first tensor element is taken. InvalidArgument when
// forward returns nothing to train on (None, ints, a tuple of lists),
// naming what it returns, or when `requested` names no tensor element.
absl::StatusOr<OutputChoice> ChooseLossOutput(torch::jit::Module& model,
                                              const std::string& requested,
                                              const std::vector<c10::IValue>* sample_args);

// The element `selector` of a forward output (the output itself when the
// selector is empty, which must then be a tensor). InvalidArgument otherwise.
absl::StatusOr<at::Tensor> PickOutput(const c10::IValue& output, const std::string& selector);

}  // namespace harmony::common

#endif  // HARMONY_COMMON_MODEL_OUTPUT_H_
