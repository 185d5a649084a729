#include "planner/plan/no_fit.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/units.h"
#include "gtest/gtest.h"
#include "planner/search/testing/fake_profile.h"

namespace harmony::planner {
namespace {

// Four vLayers of 1 MiB of weights, the third made 8 MiB (a huge Linear).
proto::ProfileFile OneHugeLayer() {
  testing::FakeProfileOptions o;
  o.max_microbatch = 8;
  proto::ProfileFile f = testing::MakeFakeProfile(o);
  proto::VLayerProfile* v = f.mutable_profile()->mutable_vlayers(2);
  const uint64_t extra = (uint64_t{8} << 20) - v->parameter_bytes();
  v->set_parameter_bytes(v->parameter_bytes() + extra);
  v->set_gradient_bytes(v->gradient_bytes() + extra);
  v->set_optimizer_state_bytes(v->optimizer_state_bytes() + extra);
  for (proto::MicrobatchProfile& row : *v->mutable_by_microbatch()) {
    row.set_forward_peak_bytes(row.forward_peak_bytes() + extra);
    row.set_backward_peak_bytes(row.backward_peak_bytes() + 2 * extra);
    if (row.backward_first_peak_bytes() > 0) {
      row.set_backward_first_peak_bytes(row.backward_first_peak_bytes() + 2 * extra);
    }
  }
  return f;
}

MakePlanOptions Options(uint64_t memory) {
  MakePlanOptions o;
  o.num_devices = 2;
  o.device_memory = memory;
  o.minibatch = 8;
  return o;
}

TEST(NoFitTest, NamesTheLargestVLayerAndWhatItHolds) {
  absl::StatusOr<LargestVLayer> l = FindLargestVLayer(OneHugeLayer());
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->index, 2);
  EXPECT_TRUE(l->backward);
  EXPECT_EQ(l->microbatch, 1);
  EXPECT_EQ(l->weight_bytes, uint64_t{8} << 20);
  EXPECT_EQ(l->gradient_bytes, uint64_t{8} << 20);
  EXPECT_GT(l->activation_bytes, 0u);
  EXPECT_GE(l->need_bytes, uint64_t{16} << 20);
}

TEST(NoFitTest, SmallestMemoryIsWhereTheSearchStartsToPlan) {
  const proto::ProfileFile f = OneHugeLayer();
  // 4 MiB cannot hold the 8 MiB layer.
  ASSERT_TRUE(absl::IsResourceExhausted(MakePlan(f, Options(4 << 20)).status()));
  absl::StatusOr<uint64_t> smallest = SmallestDeviceMemory(f, Options(4 << 20));
  ASSERT_TRUE(smallest.ok()) << smallest.status();
  EXPECT_EQ(*smallest % (64 << 10), 0u);
  // It plans there (at the smallest microbatch) and not 2% below.
  MakePlanOptions at = Options(*smallest);
  at.microbatch = 1;
  absl::StatusOr<MadePlan> made = MakePlan(f, at);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(made->result.sim.fits);
  MakePlanOptions below = Options(*smallest * 98 / 100);
  below.microbatch = 1;
  absl::StatusOr<MadePlan> under = MakePlan(f, below);
  EXPECT_TRUE(!under.ok() || !under->result.sim.fits);
  // The layer alone needs more than the device keeps for it.
  absl::StatusOr<LargestVLayer> l = FindLargestVLayer(f);
  ASSERT_TRUE(l.ok());
  EXPECT_GE(static_cast<double>(*smallest), l->need_bytes / (1 - at.memory_reserve) * 0.99);
}

// A pinned microbatch is kept: the answer plans at that microbatch (more
// memory than at the smallest), and the message says which.
TEST(NoFitTest, SmallestMemoryKeepsAPinnedMicrobatch) {
  testing::FakeProfileOptions o;
  o.max_microbatch = 8;
  o.activation_bytes = 256 << 10;  // Per sample: microbatch 8 needs MiBs more.
  const proto::ProfileFile f = testing::MakeFakeProfile(o);
  absl::StatusOr<uint64_t> at1 = SmallestDeviceMemory(f, Options(4 << 20));
  ASSERT_TRUE(at1.ok()) << at1.status();
  MakePlanOptions pinned = Options(4 << 20);
  pinned.microbatch = 8;
  absl::StatusOr<uint64_t> at8 = SmallestDeviceMemory(f, pinned);
  ASSERT_TRUE(at8.ok()) << at8.status();
  EXPECT_GT(*at8, *at1);
  pinned.device_memory = *at8;
  absl::StatusOr<MadePlan> made = MakePlan(f, pinned);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_TRUE(made->result.sim.fits);
  EXPECT_EQ(made->result.graph.config.backward_microbatch, 8);
  absl::StatusOr<LargestVLayer> l = FindLargestVLayer(f);
  ASSERT_TRUE(l.ok());
  pinned.device_memory = 4 << 20;
  EXPECT_NE(DescribeNoFit(*l, pinned, *at8).find(absl::StrCat(
                "the smallest --device-memory that plans is ", common::FormatBytes(*at8),
                " at --microbatch 8")),
            std::string::npos);
}

TEST(NoFitTest, MessageSaysWhatToChange) {
  LargestVLayer l;
  l.index = 3;
  l.scope = "classifier.0";
  l.node_begin = 120;
  l.node_end = 132;
  l.weight_bytes = 392u << 20;
  l.gradient_bytes = 392u << 20;
  l.activation_bytes = 8 << 10;
  l.need_bytes = 1200u << 20;
  const std::string m = DescribeNoFit(l, Options(384u << 20), 1300u << 20);
  EXPECT_NE(m.find("2 device(s) of 384.00 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("10% kept free"), std::string::npos) << m;
  EXPECT_NE(m.find("vLayer 3 (classifier.0, ops 120-131 of forward)"), std::string::npos) << m;
  EXPECT_NE(m.find("weights 392.00 MiB, gradients 392.00 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("the smallest --device-memory that plans is 1.27 GiB"), std::string::npos)
      << m;
}

}  // namespace
}  // namespace harmony::planner
