// harmony::dropout against LibTorch's own: the same values and gradients,
// bit for bit, from a generator of the thread's own seeded as the global
// one; threads drawing at once each get their seed's numbers.

#include "common/dropout.h"

#include <mutex>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/torch.h>

#include "gtest/gtest.h"

namespace harmony::common {
namespace {

struct Result {
  at::Tensor out, grad;
};

// Transposed, as attention's weights often are: the noise is drawn in
// the contiguous order whatever the input's strides.
at::Tensor Input(bool transposed = false) {
  at::Tensor x = torch::linspace(-3, 3, 4 * 33 * 17).reshape({4, 33, 17});
  return transposed ? x.transpose(1, 2) : x;
}

// harmony::dropout through the dispatcher, as the JIT calls it.
at::Tensor CallOwn(const at::Tensor& x, double p, bool train) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow(DropoutOp(), "")
                       .typed<at::Tensor(const at::Tensor&, double, bool)>();
  return op.call(x, p, train);
}

// aten::dropout drawing from the global generator seeded with `seed`.
Result Reference(uint64_t seed, double p, bool transposed = false) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed);
  }
  at::Tensor x = Input(transposed).detach().requires_grad_(true);
  at::Tensor out = at::dropout(x, p, true);
  out.backward(torch::ones_like(out) * 0.5);
  return {out.detach(), x.grad()};
}

Result Own(uint64_t seed, double p, bool transposed = false) {
  DropoutGeneratorScope scope(seed);
  at::Tensor x = Input(transposed).detach().requires_grad_(true);
  at::Tensor out = CallOwn(x, p, true);
  out.backward(torch::ones_like(out) * 0.5);
  return {out.detach(), x.grad()};
}

TEST(DropoutTest, EqualsLibTorchsDropoutBitForBit) {
  for (double p : {0.1, 0.5, 0.9}) {
    for (uint64_t seed : {1ull, 42ull, 123456789ull}) {
      for (bool transposed : {false, true}) {
      const Result want = Reference(seed, p, transposed);
      const Result got = Own(seed, p, transposed);
      EXPECT_TRUE(torch::equal(got.out, want.out)) << "p " << p << " seed " << seed;
      EXPECT_TRUE(torch::equal(got.grad, want.grad)) << "p " << p << " seed " << seed;
      // Something was dropped and something kept.
      const int64_t zeros = (want.out == 0).sum().item<int64_t>();
      EXPECT_GT(zeros, 0);
      EXPECT_LT(zeros, want.out.numel());
      }
    }
  }
  // Not training, or p = 0: the input itself; p = 1: zeros.
  DropoutGeneratorScope scope(7);
  const at::Tensor x = Input();
  EXPECT_TRUE(CallOwn(x, 0.5, false).is_same(x));
  EXPECT_TRUE(CallOwn(x, 0.0, true).is_same(x));
  EXPECT_EQ(CallOwn(x, 1.0, true).abs().sum().item<double>(), 0.0);
}

TEST(DropoutTest, ThreadsDrawTheirOwnSeedsAtOnce) {
  const std::vector<uint64_t> seeds = {3, 5, 3, 9};
  std::vector<Result> want;
  for (uint64_t s : seeds) want.push_back(Reference(s, 0.3));
  std::vector<std::vector<Result>> got(seeds.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < seeds.size(); ++t) {
    threads.emplace_back([&, t] {
      at::set_num_threads(1);
      for (int i = 0; i < 50; ++i) got[t].push_back(Own(seeds[t], 0.3));
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t t = 0; t < seeds.size(); ++t) {
    for (size_t i = 0; i < got[t].size(); ++i) {
      ASSERT_TRUE(torch::equal(got[t][i].out, want[t].out)) << "thread " << t << " run " << i;
      ASSERT_TRUE(torch::equal(got[t][i].grad, want[t].grad)) << "thread " << t << " run " << i;
    }
  }
  EXPECT_FALSE(torch::equal(want[0].out, want[1].out));
}

TEST(DropoutTest, WithoutAScopeItIsLibTorchsDropout) {
  const Result want = Reference(77, 0.4);
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(77);
  }
  at::Tensor x = Input().requires_grad_(true);
  at::Tensor out = CallOwn(x, 0.4, true);
  out.backward(torch::ones_like(out) * 0.5);
  EXPECT_TRUE(torch::equal(out.detach(), want.out));
  EXPECT_TRUE(torch::equal(x.grad(), want.grad));
}

}  // namespace
}  // namespace harmony::common
