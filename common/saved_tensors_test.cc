#include "common/saved_tensors.h"

#include <memory>
#include <vector>

#include <torch/csrc/autograd/engine.h>
#include <torch/torch.h>

#include "gtest/gtest.h"

namespace harmony::common {
namespace {

at::Tensor Copy(const at::Tensor& bytes) { return bytes.clone(); }

// The hooked engine is the default before main runs and before any call:
// a backward that ran first on LibTorch's base engine would leave the hooked
// one without the GPUs' autograd queues (saved_tensors.h).
TEST(SavedTensorsTest, TheHookedEngineIsTheDefaultBeforeAnyCall) {
  EXPECT_NE(&torch::autograd::Engine::get_default_engine(),
            &torch::autograd::Engine::get_base_engine());
}

// A forward whose saved tensors are kept, offloaded, restored and unpacked
// against other copies of the weights gives autograd's gradients bit for bit.
TEST(SavedTensorsTest, OffloadedBackwardEqualsAutograd) {
  InstallSavedTensorHooks();
  torch::manual_seed(0);
  const at::Tensor x0 = torch::randn({8, 16});
  const at::Tensor w0 = torch::randn({16, 32});
  const at::Tensor b0 = torch::randn({32});
  auto forward = [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return torch::tanh(torch::relu(torch::addmm(b, x, w)) * 3).sum(1) ;
  };
  // Plain autograd.
  at::Tensor x = x0.clone().requires_grad_(true);
  at::Tensor w = w0.clone().requires_grad_(true);
  at::Tensor b = b0.clone().requires_grad_(true);
  const at::Tensor seed = torch::linspace(-1, 1, 8);
  auto want = torch::autograd::grad({forward(x, w, b)}, {x, w, b}, {seed});

  // Kept: the weights resolved to other copies, the rest offloaded.
  at::Tensor kx = x0.clone().requires_grad_(true);
  at::Tensor kw = w0.clone().requires_grad_(true);
  at::Tensor kb = b0.clone().requires_grad_(true);
  auto saved = std::make_shared<SavedTensors>(std::vector<at::Tensor>{kw, kb});
  at::Tensor out;
  {
    SaveInto into(saved);
    out = forward(kx, kw, kb);
  }
  EXPECT_GT(saved->saved_count(), 3);
  // x (addmm's input), relu's output, tanh's output: never the weights.
  EXPECT_EQ(saved->bytes(), 8u * 16 * 4 + 8u * 32 * 4 + 8u * 32 * 4);
  const auto x_storage = kx.storage();
  saved->Offload(Copy);
  EXPECT_EQ(x_storage.use_count(), 2);  // kx and this: the saved copy left.
  // The forward's own weights are gone; the backward reads fresh copies.
  kw.set_data(at::empty({0}));
  kb.set_data(at::empty({0}));
  saved->Restore(Copy);
  saved->SetWeights({w0.clone(), b0.clone()});
  auto got = torch::autograd::grad({out}, {kx, kw, kb}, {seed});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(torch::equal(got[i], want[i])) << "gradient " << i;
  }
}

TEST(SavedTensorsTest, StorageSharedByTwoSavesIsKeptOnce) {
  InstallSavedTensorHooks();
  at::Tensor x = torch::randn({4, 4}).requires_grad_(true);
  auto saved = std::make_shared<SavedTensors>(std::vector<at::Tensor>{});
  at::Tensor y;
  {
    SaveInto into(saved);
    y = (x * x).sum();  // x saved twice (self and other).
  }
  EXPECT_EQ(saved->saved_count(), 2);
  EXPECT_EQ(saved->bytes(), 4u * 4 * 4);
  saved->Offload(Copy);
  saved->Restore(Copy);
  auto g = torch::autograd::grad({y}, {x});
  EXPECT_TRUE(torch::equal(g[0], 2 * x.detach()));
}

TEST(SavedTensorsTest, WithoutSaveIntoAutogradHoldsAsUsual) {
  InstallSavedTensorHooks();
  at::Tensor x = torch::randn({3}).requires_grad_(true);
  at::Tensor y = (x * x).sum();
  y.backward();
  EXPECT_TRUE(torch::equal(x.grad(), 2 * x.detach()));
}

TEST(SavedTensorsTest, UnpackBeforeRestoreSaysSo) {
  InstallSavedTensorHooks();
  at::Tensor x = torch::randn({3}).requires_grad_(true);
  auto saved = std::make_shared<SavedTensors>(std::vector<at::Tensor>{});
  at::Tensor y;
  {
    SaveInto into(saved);
    y = (x * x).sum();
  }
  saved->Offload(Copy);
  try {
    torch::autograd::grad({y}, {x});
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("still on the host"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace harmony::common
