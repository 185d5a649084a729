#include "common/precision.h"

#include "absl/strings/str_cat.h"

namespace harmony::common {

std::set<std::string> Fp32ParameterNames(const torch::jit::Module& model) {
  std::set<std::string> out;
  for (const torch::jit::NameModule& m : model.named_modules()) {
    bool keep = false;
    if (const auto& type = m.value.type()->name()) keep = type->name() == "EmbeddingBag";
    for (const torch::jit::NameTensor& b : m.value.named_buffers(/*recurse=*/false)) {
      keep = keep || at::isFloatingType(b.value.scalar_type());
    }
    if (!keep) continue;
    for (const torch::jit::NameTensor& p : m.value.named_parameters(/*recurse=*/false)) {
      out.insert(m.name.empty() ? p.name : absl::StrCat(m.name, ".", p.name));
    }
  }
  return out;
}

std::vector<std::vector<bool>> Bf16ParameterMask(const torch::jit::Module& model,
                                                 const Decomposition& d) {
  const std::set<std::string> fp32 = Fp32ParameterNames(model);
  std::vector<std::vector<bool>> out;
  for (const VLayerInfo& v : d.vlayers()) {
    std::vector<bool>& mask = out.emplace_back();
    for (const std::string& name : v.parameters) mask.push_back(fp32.count(name) == 0);
  }
  return out;
}

std::vector<at::Tensor> AsBf16(const std::vector<at::Tensor>& params,
                               const std::vector<bool>& bf16) {
  std::vector<at::Tensor> out;
  out.reserve(params.size());
  for (size_t j = 0; j < params.size(); ++j) {
    const bool convert = j < bf16.size() && bf16[j] && at::isFloatingType(params[j].scalar_type());
    out.push_back(convert ? params[j].to(at::kBFloat16) : params[j]);
  }
  return out;
}

}  // namespace harmony::common
