// The fused CPU optimizer against torch::optim on the same tensors.

#include "optim/cpu_optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>

#include "gtest/gtest.h"

namespace harmony::optim {
namespace {

struct Case {
  std::string name;
  OptimizerOptions options;
};

// Runs `steps` steps of ours and torch's from the same start with the same
// gradients; returns the largest difference of the parameters relative to
// their scale (|ours - torch| / max(|torch|, 1); the parameters are N(0, 1)),
// as allclose(rtol, atol) judges it. One-ulp differences of fused vs
// separate multiply-adds would look large relative to parameters that happen
// to cross zero.
double MaxRelativeDifference(const OptimizerOptions& o, int64_t n, int steps) {
  torch::manual_seed(3);
  at::Tensor start = torch::randn({n});
  at::Tensor ours = start.clone();
  at::Tensor theirs = start.clone().requires_grad_(true);
  std::unique_ptr<torch::optim::Optimizer> reference;
  if (o.kind == OptimizerKind::kSgd) {
    reference = std::make_unique<torch::optim::SGD>(
        std::vector<at::Tensor>{theirs}, torch::optim::SGDOptions(o.learning_rate)
                                             .momentum(o.momentum)
                                             .dampening(o.dampening)
                                             .nesterov(o.nesterov)
                                             .weight_decay(o.weight_decay));
  } else if (o.kind == OptimizerKind::kAdam) {
    reference = std::make_unique<torch::optim::Adam>(
        std::vector<at::Tensor>{theirs},
        torch::optim::AdamOptions(o.learning_rate)
            .betas({o.beta1, o.beta2})
            .eps(o.epsilon)
            .weight_decay(o.weight_decay));
  } else {
    reference = std::make_unique<torch::optim::AdamW>(
        std::vector<at::Tensor>{theirs},
        torch::optim::AdamWOptions(o.learning_rate)
            .betas({o.beta1, o.beta2})
            .eps(o.epsilon)
            .weight_decay(o.weight_decay));
  }
  auto optimizer = CpuOptimizer::Create(o, n);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  double worst = 0;
  for (int s = 0; s < steps; ++s) {
    at::Tensor grad = torch::randn({n});
    theirs.mutable_grad() = grad.clone();
    reference->step();
    (*optimizer)->Step(ours.data_ptr<float>(), grad.data_ptr<float>());
    const at::Tensor expected = theirs.detach();
    const at::Tensor relative = (ours - expected).abs() / expected.abs().clamp_min(1.0);
    worst = std::max(worst, relative.max().item<double>());
  }
  return worst;
}

class CpuOptimizerTest : public ::testing::TestWithParam<Case> {};

// Bit for bit: the kernels round as torch::optim's tensor operations do
// (fused multiply-adds where ATen's add with alpha fuses, nowhere else).
TEST_P(CpuOptimizerTest, MatchesTorchOptimBitForBit) {
  // Sizes around the vector width and the parallel grain, and a large one.
  for (int64_t n : {1, 7, 33, 4099, (1 << 15) + 3, 1 << 20}) {
    EXPECT_EQ(MaxRelativeDifference(GetParam().options, n, 5), 0)
        << GetParam().name << ", " << n << " elements";
  }
}

OptimizerOptions Sgd(double momentum, double dampening, bool nesterov, double wd) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.learning_rate = 0.05;
  o.momentum = momentum;
  o.dampening = dampening;
  o.nesterov = nesterov;
  o.weight_decay = wd;
  return o;
}

OptimizerOptions Adam(OptimizerKind kind, double wd) {
  OptimizerOptions o;
  o.kind = kind;
  o.learning_rate = 1e-3;
  o.weight_decay = wd;
  return o;
}

INSTANTIATE_TEST_SUITE_P(
    All, CpuOptimizerTest,
    ::testing::Values(Case{"sgd", Sgd(0, 0, false, 0)},
                      Case{"sgd_momentum", Sgd(0.9, 0, false, 0)},
                      Case{"sgd_momentum_dampening_decay", Sgd(0.9, 0.1, false, 1e-4)},
                      Case{"sgd_nesterov", Sgd(0.9, 0, true, 1e-4)},
                      Case{"adam", Adam(OptimizerKind::kAdam, 0)},
                      Case{"adam_decay", Adam(OptimizerKind::kAdam, 1e-2)},
                      Case{"adamw", Adam(OptimizerKind::kAdamW, 1e-2)}),
    [](const auto& info) { return info.param.name; });

TEST(CpuOptimizerCreateTest, RefusesBadOptions) {
  OptimizerOptions o;
  o.learning_rate = -1;
  EXPECT_EQ(CpuOptimizer::Create(o, 4).status().code(), absl::StatusCode::kInvalidArgument);
  o = Sgd(0, 0, true, 0);  // Nesterov without momentum.
  EXPECT_EQ(CpuOptimizer::Create(o, 4).status().code(), absl::StatusCode::kInvalidArgument);
  o = Adam(OptimizerKind::kAdam, 0);
  o.beta2 = 1.0;
  EXPECT_NE(CpuOptimizer::Create(o, 4).status().message().find("betas"), std::string::npos);
  EXPECT_EQ(ParseOptimizerKind("adamw").value(), OptimizerKind::kAdamW);
  EXPECT_NE(ParseOptimizerKind("lamb").status().message().find("\"lamb\""),
            std::string::npos);
  EXPECT_EQ(StateBytesPerElement(Sgd(0.9, 0, false, 0)), 4u);
  EXPECT_EQ(StateBytesPerElement(Adam(OptimizerKind::kAdamW, 0)), 8u);
  EXPECT_EQ(CpuOptimizer::Create(Adam(OptimizerKind::kAdam, 0), 10).value()->state().size(),
            20u);
}

}  // namespace
}  // namespace harmony::optim
