// What a profile says about the model it measured (proto::ModelIdentity):
// the file's hash and its decomposition into vLayers, which the executor
// re-creates. The profiler fills it; AdoptModel gives a synthesized profile
// (harmony-plan synthesize: a model too large to profile, described from a
// smaller one's blocks) the identity of the real model it describes, so a
// plan made from it trains that model.

#ifndef HARMONY_PLANNER_PROFILE_MODEL_IDENTITY_H_
#define HARMONY_PLANNER_PROFILE_MODEL_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/decomposer.h"
#include "proto/plan.pb.h"

namespace harmony::planner {

// Sets identity's decomposition (granularity, cut points, every vLayer's
// scope, nodes, parameters, buffers and live-ins) and has_batch_statistics
// from `d`.
void SetDecomposition(const common::Decomposition& d, int granularity,
                      proto::ModelIdentity* identity);

// The synthesized profile `profile` with the identity of the TorchScript
// model at `model_path`: its hash, name, size and decomposition (at the
// profile's granularity and loss output). The model must decompose into as
// many vLayers as the profile has, each with the parameter bytes the
// profile gives it (in the profile's precision); otherwise the error names
// the first that differs. The profile's sample shapes, loss and timings are
// kept. An error for a profile that was measured, not synthesized.
absl::StatusOr<proto::ProfileFile> AdoptModel(const proto::ProfileFile& profile,
                                              const std::string& model_path);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_PROFILE_MODEL_IDENTITY_H_
