// The bf16 rule of a bf16 plan (proto::Configuration.precision BF16), the
// same in the profiler, the runtime, the evaluator and the reference loop
// (tests/suite/reference_train.py): the vLayers and the loss run under
// autocast to bf16 (common/autocast.h), on bf16 copies of the fp32 master
// parameters, except those LibTorch's CPU kernels need in fp32, which stay
// fp32 (their bytes are small):
//   - the parameters of a module that holds floating-point buffers
//     (BatchNorm: its kernel takes its weight and running statistics in
//     one dtype, and the statistics stay fp32);
//   - the parameters of an EmbeddingBag (no bf16 kernel).
// Buffers stay fp32.
//
// Thread-safety: functions of their arguments.

#ifndef HARMONY_COMMON_PRECISION_H_
#define HARMONY_COMMON_PRECISION_H_

#include <set>
#include <string>
#include <vector>

#include <torch/script.h>

#include "common/decomposer.h"

namespace harmony::common {

// The dotted names of `model`'s parameters that stay fp32.
std::set<std::string> Fp32ParameterNames(const torch::jit::Module& model);

// Per vLayer of `d`, per parameter in its order: whether a bf16 plan's
// devices hold it as bf16.
std::vector<std::vector<bool>> Bf16ParameterMask(const torch::jit::Module& model,
                                                 const Decomposition& d);

// `params` (a vLayer's, in its order) as a bf16 plan's device takes them:
// bf16 copies where `bf16[j]`, the tensors themselves elsewhere.
std::vector<at::Tensor> AsBf16(const std::vector<at::Tensor>& params,
                               const std::vector<bool>& bf16);

}  // namespace harmony::common

#endif  // HARMONY_COMMON_PRECISION_H_
