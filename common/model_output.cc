#include "common/model_output.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/jit/api/module.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/torch_status.h"

namespace harmony::common {
namespace {

bool IsTensor(const c10::TypePtr& type) { return static_cast<bool>(type->cast<c10::TensorType>()); }

// A NamedTuple's field names; empty for a plain tuple.
std::vector<std::string> FieldNames(const c10::TupleType& tuple) {
  std::vector<std::string> names;
  if (tuple.schema() == nullptr) return names;
  for (const c10::Argument& a : tuple.schema()->arguments()) names.push_back(a.name());
  return names;
}

std::string Quoted(const std::string& s) { return absl::StrCat("'", s, "'"); }

// "Tuple[Tensor, Tensor]", "NamedTuple Heads(logits: Tensor, aux: Tensor)".
std::string Describe(const c10::TypePtr& type) {
  auto tuple = type->cast<c10::TupleType>();
  if (!tuple || tuple->schema() == nullptr) return type->annotation_str();
  std::vector<std::string> fields;
  for (const c10::Argument& a : tuple->schema()->arguments()) {
    fields.push_back(absl::StrCat(a.name(), ": ", a.type()->annotation_str()));
  }
  std::string name = tuple->name() ? tuple->name()->name() : "";
  return absl::StrCat("NamedTuple ", name, "(", absl::StrJoin(fields, ", "), ")");
}

}  // namespace

absl::StatusOr<OutputElement> FindOutputElement(const c10::TypePtr& type,
                                                const std::string& selector) {
  const std::string what = absl::StrCat("forward returns ", Describe(type));
  int parsed = -1;  // SimpleAtoi may write to it even when it fails.
  const bool numeric = absl::SimpleAtoi(selector, &parsed) && parsed >= 0;
  int index = numeric ? parsed : -1;
  OutputElement e;
  if (auto tuple = type->cast<c10::TupleType>()) {
    const std::vector<std::string> fields = FieldNames(*tuple);
    for (size_t i = 0; i < fields.size(); ++i) {
      if (fields[i] == selector) index = static_cast<int>(i);
    }
    const int size = static_cast<int>(tuple->elements().size());
    if (index < 0 || index >= size) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ", which has no element ", Quoted(selector), " (it has elements 0-", size - 1,
          fields.empty() ? "" : absl::StrCat(", fields ", absl::StrJoin(fields, ", ")), ")"));
    }
    if (!IsTensor(tuple->elements()[index])) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "; its element ", Quoted(selector), " is ",
                       tuple->elements()[index]->annotation_str(), ", not a tensor"));
    }
    e.index = index;
    e.label = fields.empty() ? absl::StrCat("element ", index)
                             : absl::StrCat("field ", Quoted(fields[index]));
    return e;
  }
  if (auto list = type->cast<c10::ListType>()) {
    if (!IsTensor(list->getElementType())) {
      return absl::InvalidArgumentError(absl::StrCat(what, ", which holds no tensor to train on"));
    }
    if (!numeric) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, "; choose an element by its index, not ", Quoted(selector)));
    }
    e.index = index;
    e.label = absl::StrCat("element ", index);
    return e;
  }
  if (auto dict = type->cast<c10::DictType>()) {
    if (!dict->getKeyType()->cast<c10::StringType>() || !IsTensor(dict->getValueType())) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, "; only Dict[str, Tensor] outputs are supported"));
    }
    e.key = selector;
    e.label = absl::StrCat("key ", Quoted(selector));
    return e;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, "; --loss-output ", Quoted(selector),
      " applies to a tuple, list, dict or NamedTuple output"));
}

absl::StatusOr<OutputChoice> ChooseLossOutput(torch::jit::Module& model,
                                              const std::string& requested,
                                              const std::vector<c10::IValue>* sample_args) {
  auto method = model.find_method("forward");
  if (!method) return absl::InvalidArgumentError("the model has no forward method");
  const auto& returns = method->function().getSchema().returns();
  if (returns.size() != 1) {
    return absl::InvalidArgumentError("forward returns nothing to train on");
  }
  const c10::TypePtr type = returns[0].type();
  const std::string returned = Describe(type);
  OutputChoice choice;
  if (IsTensor(type)) {
    if (!requested.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "forward returns a Tensor; --loss-output ", Quoted(requested),
          " applies to a tuple, list, dict or NamedTuple output"));
    }
    return choice;
  }
  // Whether the type can hold a tensor element at all.
  bool has_tensor = false;
  if (auto tuple = type->cast<c10::TupleType>()) {
    for (const c10::TypePtr& t : tuple->elements()) has_tensor = has_tensor || IsTensor(t);
  } else if (auto list = type->cast<c10::ListType>()) {
    has_tensor = IsTensor(list->getElementType());
  } else if (auto dict = type->cast<c10::DictType>()) {
    has_tensor = dict->getKeyType()->cast<c10::StringType>() && IsTensor(dict->getValueType());
  }
  if (!has_tensor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "forward returns ", returned,
        ", which holds no tensor to train on (return the loss, the logits, or a tuple, list, "
        "Dict[str, Tensor] or NamedTuple of tensors)"));
  }
  if (!requested.empty()) {
    HARMONY_ASSIGN_OR_RETURN(OutputElement e, FindOutputElement(type, requested));
    choice.selector = requested;
    choice.message = absl::StrCat("forward returns ", returned, "; training on its ", e.label,
                                  " (--loss-output)");
    return choice;
  }
  // Candidates in order: (selector, value or none).
  std::vector<std::string> selectors;
  std::vector<c10::IValue> values;
  if (sample_args != nullptr) {
    const bool was_training = model.is_training();
    HARMONY_ASSIGN_OR_RETURN(c10::IValue out, CallTorch("running forward to choose the loss", [&] {
      c10::NoGradGuard no_grad;
      model.eval();
      c10::IValue result;
      try {
        result = model.forward(*sample_args);
      } catch (...) {
        model.train(was_training);
        throw;
      }
      model.train(was_training);
      return result;
    }));
    if (out.isTuple()) {
      const auto& elements = out.toTupleRef().elements();
      for (size_t i = 0; i < elements.size(); ++i) {
        selectors.push_back(absl::StrCat(i));
        values.push_back(elements[i]);
      }
    } else if (out.isList()) {
      const c10::List<c10::IValue> list = out.toList();
      for (size_t i = 0; i < list.size(); ++i) {
        selectors.push_back(absl::StrCat(i));
        values.push_back(list.get(i));
      }
    } else if (out.isGenericDict()) {
      for (const auto& item : out.toGenericDict()) {
        if (!item.key().isString()) continue;
        selectors.push_back(item.key().toStringRef());
        values.push_back(item.value());
      }
    }
  } else if (auto tuple = type->cast<c10::TupleType>()) {
    for (size_t i = 0; i < tuple->elements().size(); ++i) {
      if (!IsTensor(tuple->elements()[i])) continue;
      selectors.push_back(absl::StrCat(i));
      values.emplace_back();
    }
  } else if (type->cast<c10::ListType>()) {
    selectors.push_back("0");
    values.emplace_back();
  }
  int first_tensor = -1, first_scalar = -1;
  for (size_t i = 0; i < selectors.size(); ++i) {
    if (sample_args == nullptr) {
      first_tensor = static_cast<int>(i);
      break;
    }
    if (!values[i].isTensor()) continue;
    if (first_tensor < 0) first_tensor = static_cast<int>(i);
    if (values[i].toTensor().dim() == 0) {
      first_scalar = static_cast<int>(i);
      break;
    }
  }
  const int pick = first_scalar >= 0 ? first_scalar : first_tensor;
  if (pick < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "forward returns ", returned,
        sample_args == nullptr ? "; give a sample input, or name the element with --loss-output"
                               : ", and on the sample input none of it is a tensor"));
  }
  choice.selector = selectors[pick];
  HARMONY_ASSIGN_OR_RETURN(OutputElement e, FindOutputElement(type, choice.selector));
  choice.message = absl::StrCat(
      "forward returns ", returned, "; training on its ", e.label,
      first_scalar >= 0 ? ", the first scalar (the model's own loss)"
      : sample_args != nullptr
          ? ", the first tensor (none is a scalar: the loss is applied to it)"
          : ", the first tensor (without a sample input scalars are not known)",
      "; --loss-output chooses another");
  return choice;
}

absl::StatusOr<at::Tensor> PickOutput(const c10::IValue& output, const std::string& selector) {
  if (selector.empty()) {
    if (output.isTensor()) return output.toTensor();
    return absl::InvalidArgumentError(absl::StrCat(
        "forward returned ", output.tagKind(), ", not a tensor; choose an element with --loss-output"));
  }
  HARMONY_ASSIGN_OR_RETURN(OutputElement e, FindOutputElement(output.type(), selector));
  c10::IValue picked;
  if (output.isTuple()) {
    const auto& elements = output.toTupleRef().elements();
    if (e.index < static_cast<int>(elements.size())) picked = elements[e.index];
  } else if (output.isList()) {
    const c10::List<c10::IValue> list = output.toList();
    if (e.index < static_cast<int>(list.size())) picked = list.get(e.index);
  } else if (output.isGenericDict()) {
    const c10::Dict<c10::IValue, c10::IValue> dict = output.toGenericDict();
    auto it = dict.find(c10::IValue(e.key));
    if (it != dict.end()) picked = it->value();
  }
  if (!picked.isTensor()) {
    return absl::InvalidArgumentError(
        absl::StrCat("forward's output has no tensor at ", e.label));
  }
  return picked.toTensor();
}

}  // namespace harmony::common
