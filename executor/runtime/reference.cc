#include "executor/runtime/reference.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/optim.h>

#include "absl/strings/str_cat.h"
#include "common/decomposer.h"
#include "common/decomposition_record.h"
#include "common/denormals.h"
#include "common/intra_op_threads.h"
#include "common/loss.h"
#include "common/model_output.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "executor/runtime/runtime.h"
#include "plan/plan_reader.h"

namespace harmony::executor {
namespace {

using common::CallTorch;

std::unique_ptr<torch::optim::Optimizer> TorchOptimizer(const optim::OptimizerOptions& o,
                                                        std::vector<at::Tensor> params) {
  switch (o.kind) {
    case optim::OptimizerKind::kSgd:
      return std::make_unique<torch::optim::SGD>(
          params, torch::optim::SGDOptions(o.learning_rate)
                      .momentum(o.momentum)
                      .dampening(o.dampening)
                      .nesterov(o.nesterov)
                      .weight_decay(o.weight_decay));
    case optim::OptimizerKind::kAdam:
      return std::make_unique<torch::optim::Adam>(
          params, torch::optim::AdamOptions(o.learning_rate)
                      .betas({o.beta1, o.beta2})
                      .eps(o.epsilon)
                      .weight_decay(o.weight_decay));
    case optim::OptimizerKind::kAdamW:
      return std::make_unique<torch::optim::AdamW>(
          params, torch::optim::AdamWOptions(o.learning_rate)
                      .betas({o.beta1, o.beta2})
                      .eps(o.epsilon)
                      .weight_decay(o.weight_decay));
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::vector<double>> TrainReferenceForPlan(const proto::Plan& plan,
                                                          torch::jit::Module& model,
                                                          const common::TrainingData& data_in,
                                                          const ReferenceOptions& options) {
  HARMONY_ASSIGN_OR_RETURN(plan::TaskGraph graph, plan::TaskGraphFromPlan(plan));
  const int minibatch = graph.config.minibatch;
  // On the intra-op threads of the runtime's devices: some kernels round
  // differently at another count.
  HARMONY_ASSIGN_OR_RETURN(const int threads,
                           common::ThreadsPerDevice(options.threads, graph.config.num_devices));
  common::ScopedIntraOpThreads on_device_threads(threads);
  common::ScopedFlushDenormal denormals(options.flush_denormal.value_or(
      plan.profile().has_flush_denormal() && plan.profile().flush_denormal()));
  // The plan's microbatches: those of the last backward pack's tasks.
  std::set<std::pair<int, int>> microbatches;
  const int last = static_cast<int>(graph.config.backward_packs.size()) - 1;
  for (const plan::Task& t : graph.tasks) {
    if (t.kind != plan::TaskKind::kBackward || t.pack != last) continue;
    for (const plan::Microbatch& mb : t.microbatches) microbatches.insert({mb.offset, mb.size});
  }
  std::vector<int> cuts(plan.model().decomposition().cut_points().begin(),
                        plan.model().decomposition().cut_points().end());
  HARMONY_ASSIGN_OR_RETURN(auto dec, common::Decomposition::CreateWithCuts(
                                         model, cuts, plan.model().loss_output()));
  HARMONY_RETURN_IF_ERROR(common::CheckDecompositionRecord(*dec, plan.model().decomposition()));
  common::TrainingData arranged = data_in;
  HARMONY_RETURN_IF_ERROR(common::ArrangeInputs(dec->forward_arguments(), &arranged));
  const common::TrainingData& data = arranged;
  common::LossKind loss_kind = common::LossKind::kAuto;
  if (plan.model().loss() == proto::CROSS_ENTROPY) loss_kind = common::LossKind::kCrossEntropy;
  if (plan.model().loss() == proto::MSE) loss_kind = common::LossKind::kMse;
  HARMONY_ASSIGN_OR_RETURN(
      bool takes_targets,
      common::ForwardTakesTargets(dec->forward_arguments(), data.inputs, data.targets));

  // Per vLayer: its parameters and buffers, and the optimizer.
  const int count = dec->num_vlayers();
  // A parameter several vLayers read is stepped with the first (as the
  // runtime's host store owns it there).
  std::vector<std::vector<at::Tensor>> params(count), owned(count), buffers(count);
  std::vector<at::Tensor> all;
  std::set<std::string> seen;
  std::vector<std::unique_ptr<optim::CpuOptimizer>> harmony(count);
  for (int k = 0; k < count; ++k) {
    const common::VLayerInfo& info = dec->vlayers()[k];
    HARMONY_ASSIGN_OR_RETURN(params[k], common::ResolveTensors(model, info.parameters));
    HARMONY_ASSIGN_OR_RETURN(buffers[k], common::ResolveTensors(model, info.buffers));
    size_t elements = 0;
    for (size_t j = 0; j < params[k].size(); ++j) {
      at::Tensor& p = params[k][j];
      p.requires_grad_(true);
      if (!seen.insert(info.parameters[j]).second) continue;
      elements += static_cast<size_t>(p.numel());
      all.push_back(p);
      owned[k].push_back(p);
    }
    HARMONY_ASSIGN_OR_RETURN(harmony[k], optim::CpuOptimizer::Create(options.optimizer, elements));
  }
  std::unique_ptr<torch::optim::Optimizer> torch_optimizer;
  if (!options.harmony_optimizer) torch_optimizer = TorchOptimizer(options.optimizer, all);
  const at::Device on = options.device;
  const bool remote = !on.is_cpu();
  if (remote && !options.harmony_optimizer) {
    return absl::InvalidArgumentError(
        "the reference on a device other than the CPU steps with Harmony's CPU optimizer");
  }

  std::vector<double> losses;
  const int64_t n = data.size();
  for (int64_t it = 0; it < options.iterations; ++it) {
    std::vector<int64_t> rows(minibatch);
    for (int j = 0; j < minibatch; ++j) rows[j] = (it * minibatch + j) % n;
    at::Tensor index = at::tensor(rows, at::TensorOptions().dtype(at::kLong));
    for (const at::Tensor& p : all) p.mutable_grad() = at::Tensor();
    // What forward and backward read: the weights and buffers themselves,
    // or this iteration's copies on the device (one per tensor, so a tied
    // weight gathers both uses' gradients).
    std::vector<std::vector<at::Tensor>> run_params = params, run_buffers = buffers;
    std::map<const void*, at::Tensor> copies;
    if (remote) {
      HARMONY_RETURN_IF_ERROR(CallTorch("reference weights to the device", [&] {
        for (int k = 0; k < count; ++k) {
          for (at::Tensor& p : run_params[k]) {
            auto it = copies.find(p.unsafeGetTensorImpl());
            if (it == copies.end()) {
              at::Tensor copy = p.detach().to(on, /*non_blocking=*/false, /*copy=*/true);
              copy.requires_grad_(true);
              it = copies.emplace(p.unsafeGetTensorImpl(), copy).first;
            }
            p = it->second;
          }
          for (at::Tensor& b : run_buffers[k]) b = b.detach().to(on, false, true);
        }
      }));
    }
    double total = 0;
    for (const auto& [offset, size] : microbatches) {
      std::vector<at::Tensor> inputs, targets;
      for (const at::Tensor& t : data.inputs) {
        inputs.push_back(t.index_select(0, index).narrow(0, offset, size).to(on));
      }
      for (const at::Tensor& t : data.targets) {
        targets.push_back(t.index_select(0, index).narrow(0, offset, size).to(on));
      }
      std::vector<c10::IValue> args(inputs.begin(), inputs.end());
      if (takes_targets) args.insert(args.end(), targets.begin(), targets.end());
      at::Tensor output;
      if (options.vlayer_dropout || remote) {
        std::vector<std::vector<c10::IValue>> outs(count);
        for (int k = 0; k < count; ++k) {
          const common::VLayerInfo& info = dec->vlayers()[k];
          std::vector<c10::IValue> in;
          for (const common::ValueSource& s : info.inputs) {
            in.push_back(s.producer < 0 ? args.at(s.index) : outs[s.producer].at(s.index));
          }
          if (info.uses_rng) {
            at::Generator gen = at::globalContext().defaultGenerator(on);
            std::lock_guard<std::mutex> lock(gen.mutex());
            gen.set_current_seed(DropoutSeed(options.seed, it, offset, k));
          }
          HARMONY_ASSIGN_OR_RETURN(outs[k], dec->Run(k, run_params[k], run_buffers[k], in));
        }
        output = outs[count - 1].at(0).toTensor();
      } else {
        // As the vLayers run: without the JIT's graph optimisations, which
        // may fuse or reorder arithmetic.
        torch::jit::GraphOptimizerEnabledGuard unoptimised(false);
        HARMONY_ASSIGN_OR_RETURN(c10::IValue out, CallTorch("reference forward", [&] {
          return model.forward(args);
        }));
        HARMONY_ASSIGN_OR_RETURN(output, common::PickOutput(out, plan.model().loss_output()));
      }
      HARMONY_ASSIGN_OR_RETURN(at::Tensor loss,
                               common::LossFromOutput(output, targets, takes_targets, loss_kind));
      at::Tensor scaled = loss * (static_cast<double>(size) / minibatch);
      total += scaled.item<double>();
      HARMONY_RETURN_IF_ERROR(CallTorch("reference backward", [&] { scaled.backward(); }));
    }
    losses.push_back(total);
    c10::NoGradGuard no_grad;
    if (remote) {
      for (int k = 0; k < count; ++k) {
        for (size_t j = 0; j < buffers[k].size(); ++j) buffers[k][j].copy_(run_buffers[k][j]);
      }
    }
    if (torch_optimizer) {
      torch_optimizer->step();
      continue;
    }
    for (int k = 0; k < count; ++k) {
      if (owned[k].empty()) continue;
      std::vector<at::Tensor> ps, gs;
      for (const at::Tensor& p : owned[k]) {
        ps.push_back(p.detach().reshape({-1}));
        const at::Tensor& ran = remote ? copies.at(p.unsafeGetTensorImpl()) : p;
        gs.push_back(ran.grad().defined() ? ran.grad().to(at::kCPU).reshape({-1})
                                          : at::zeros({p.numel()}));
      }
      at::Tensor flat_p = at::cat(ps).contiguous();
      at::Tensor flat_g = at::cat(gs).contiguous();
      harmony[k]->Step(flat_p.data_ptr<float>(), flat_g.data_ptr<float>());
      int64_t at = 0;
      for (const at::Tensor& p : owned[k]) {
        p.detach().copy_(flat_p.narrow(0, at, p.numel()).view(p.sizes()));
        at += p.numel();
      }
    }
  }
  return losses;
}

}  // namespace harmony::executor
