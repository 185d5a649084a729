#include "planner/profile/model_identity.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "common/decomposition_record.h"
#include "common/files.h"
#include "common/precision.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "common/units.h"

namespace harmony::planner {

void SetDecomposition(const common::Decomposition& d, int granularity,
                      proto::ModelIdentity* identity) {
  *identity->mutable_decomposition() = common::RecordDecomposition(d, granularity);
  bool batch_statistics = false;
  for (const common::VLayerInfo& v : d.vlayers()) {
    batch_statistics = batch_statistics || v.updates_buffers;
  }
  identity->set_has_batch_statistics(batch_statistics);
}

absl::StatusOr<proto::ProfileFile> AdoptModel(const proto::ProfileFile& profile,
                                              const std::string& model_path) {
  if (!profile.profile().synthesized()) {
    return absl::InvalidArgumentError(
        "the profile was measured, not synthesized: it describes its own model");
  }
  // Hashed and loaded from the file (a 1.5B model is 6 GB: not read into
  // memory twice).
  HARMONY_ASSIGN_OR_RETURN(std::string sha, common::Sha256OfFile(model_path));
  std::error_code size_error;
  const uintmax_t file_bytes = std::filesystem::file_size(model_path, size_error);
  HARMONY_ASSIGN_OR_RETURN(
      torch::jit::Module model,
      common::CallTorch(absl::StrCat(model_path, ": not a TorchScript model"),
                        [&] { return torch::jit::load(model_path); }));
  model.train(true);
  common::DecomposeOptions options;
  options.granularity = static_cast<int>(profile.model().decomposition().granularity());
  options.output = profile.model().loss_output();
  HARMONY_ASSIGN_OR_RETURN(std::unique_ptr<common::Decomposition> d,
                           common::Decomposition::Create(model, options));
  const auto& measured = profile.profile().vlayers();
  if (d->num_vlayers() != measured.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        model_path, " splits into ", d->num_vlayers(), " vLayers, the synthesized profile has ",
        measured.size(), ": synthesize it with --blocks so that they match (harmony-plan "
        "decompose ", model_path, " lists them)"));
  }
  const bool bf16 = profile.profile().precision() == proto::BF16;
  std::vector<std::vector<bool>> mask;
  if (bf16) {
    HARMONY_ASSIGN_OR_RETURN(mask, common::CallTorch("the bf16 parameters", [&] {
      return common::Bf16ParameterMask(model, *d);
    }));
  }
  for (int k = 0; k < d->num_vlayers(); ++k) {
    HARMONY_ASSIGN_OR_RETURN(std::vector<at::Tensor> params,
                             common::ResolveTensors(model, d->vlayers()[k].parameters));
    uint64_t param_bytes = 0;
    for (size_t j = 0; j < params.size(); ++j) {
      const bool as_bf16 = bf16 && k < static_cast<int>(mask.size()) &&
                           j < mask[k].size() && mask[k][j];
      param_bytes += as_bf16 ? params[j].numel() * 2 : params[j].nbytes();
    }
    if (param_bytes != measured[k].parameter_bytes()) {
      return absl::FailedPreconditionError(absl::StrCat(
          model_path, "'s vLayer ", k, " (", d->vlayers()[k].scope, ") holds ",
          common::FormatBytes(param_bytes), " of parameters, the synthesized profile's ",
          common::FormatBytes(measured[k].parameter_bytes()),
          ": it describes another model (check --width-scale and the block it copies)"));
    }
  }
  proto::ProfileFile out = profile;
  proto::ModelIdentity* identity = out.mutable_model();
  identity->set_sha256(sha);
  identity->set_file_name(model_path.substr(model_path.find_last_of('/') + 1));
  identity->set_file_bytes(size_error ? 0 : file_bytes);
  SetDecomposition(*d, options.granularity, identity);
  return out;
}

}  // namespace harmony::planner
