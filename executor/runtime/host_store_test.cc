#include "executor/runtime/host_store.h"

#include <memory>
#include <string>

#include <torch/script.h>

#include "common/decomposer.h"
#include "gtest/gtest.h"

namespace harmony::executor {
namespace {

// The host store of the suite's GPT-2 with tied embeddings, or a failure.
void MakeStore(std::unique_ptr<HostStore>* out) {
  torch::jit::Module model = torch::jit::load("tests/suite/gpt2_tied.pt");
  absl::StatusOr<std::unique_ptr<common::Decomposition>> d =
      common::Decomposition::Create(model, common::DecomposeOptions{});
  ASSERT_TRUE(d.ok()) << d.status();
  absl::StatusOr<std::unique_ptr<HostStore>> store =
      HostStore::Create(model, **d, optim::OptimizerOptions{});
  ASSERT_TRUE(store.ok()) << store.status();
  *out = *std::move(store);
}

// A vLayer that owns all its parameters offers its flat buffer (a weight
// swap's one copy; params(k) are views of it, in order and packed); one
// whose parameter is tied to an earlier vLayer's (GPT-2's lm_head.weight =
// wte.weight) does not.
TEST(HostStoreTest, FlatBufferOfAVLayerThatOwnsAllItsParameters) {
  std::unique_ptr<HostStore> store;
  ASSERT_NO_FATAL_FAILURE(MakeStore(&store));
  int flat = 0, tied = 0;
  for (int k = 0; k < store->num_vlayers(); ++k) {
    const std::vector<at::Tensor>& params = store->params(k);
    const at::Tensor f = store->flat_params_if_all_owned(k);
    bool borrows = false;
    for (int e = 0; e < k; ++e) {
      for (const at::Tensor& p : params) {
        for (const at::Tensor& q : store->params(e)) borrows = borrows || p.is_same(q);
      }
    }
    if (borrows) {
      ++tied;
      EXPECT_FALSE(f.defined()) << "vLayer " << k << " reads a tied parameter";
      continue;
    }
    if (params.empty()) continue;
    ASSERT_TRUE(f.defined()) << "vLayer " << k;
    ++flat;
    int64_t at = f.storage_offset();
    for (const at::Tensor& p : params) {
      EXPECT_TRUE(p.is_alias_of(f));
      EXPECT_EQ(p.storage_offset(), at);
      at += p.numel();
    }
    EXPECT_EQ(at - f.storage_offset(), f.numel());
  }
  EXPECT_GT(flat, 0);
  EXPECT_EQ(tied, 1);
}

// With a count set, a send that arrives before one ahead of it in the
// plan's order is kept aside (copied) and says so; the one whose turn it is
// is summed at once, as is every send without a count.
TEST(HostStoreTest, AnEarlySendIsKeptAsideAndSaysSo) {
  std::unique_ptr<HostStore> store;
  ASSERT_NO_FATAL_FAILURE(MakeStore(&store));
  int k = 0;
  while (k < store->num_vlayers() && store->params(k).empty()) ++k;
  ASSERT_LT(k, store->num_vlayers());
  std::vector<at::Tensor> grads;
  uint64_t bytes = 0;
  for (const at::Tensor& p : store->params(k)) {
    grads.push_back(at::ones_like(p));
    bytes += p.nbytes();
  }
  bool early = true;
  EXPECT_EQ(store->AddGradients(k, grads, -1, &early), bytes);
  EXPECT_FALSE(early);
  store->SetGradientCount(k, 2);
  EXPECT_EQ(store->AddGradients(k, grads, 1, &early), bytes);
  EXPECT_TRUE(early);  // Slot 0 has not arrived.
  EXPECT_EQ(store->AddGradients(k, grads, 0, &early), bytes);
  EXPECT_FALSE(early);
  EXPECT_TRUE(store->Finalize(k, nullptr).ok());  // Both summed, in order.
}

}  // namespace
}  // namespace harmony::executor
