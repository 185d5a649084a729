#include "planner/search/packing.h"

#include "gtest/gtest.h"
#include "planner/search/testing/fake_profile.h"

namespace harmony::planner {
namespace {

using testing::FakeProfileOptions;
using testing::MakeFakeProfile;

std::shared_ptr<const CostModel> Model(FakeProfileOptions o) {
  return *CostModel::Create(MakeFakeProfile(o));
}

// Backward memory of a pack of k fake vLayers at microbatch 1:
// 2 MiB per vLayer (weights + gradients) + 1 KiB input + 3 KiB saved each.
uint64_t PackOf(int k) { return k * ((2u << 20) + 3 * 1024) + 1024; }

PackRequest Request(int layers, uint64_t budget) {
  PackRequest r;
  r.begin = 0;
  r.end = layers;
  r.microbatch = 1;
  r.phase = PackPhase::kBackward;
  r.budget = budget;
  return r;
}

void ExpectCovers(const Packing& p, int begin, int end) {
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p.front().begin, begin);
  EXPECT_EQ(p.back().end, end);
  for (size_t i = 1; i < p.size(); ++i) EXPECT_EQ(p[i].begin, p[i - 1].end);
}

TEST(PackingTest, GreedyFillsFrontToBack) {
  FakeProfileOptions o;
  o.layers = 10;
  auto m = Model(o);
  auto p = GreedyPacks(*m, Request(10, PackOf(3)));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(PackingString(*p), "[0-2][3-5][6-8][9-9]");
}

TEST(PackingTest, BalancedMemoryUsesTheFewestEvenPacks) {
  FakeProfileOptions o;
  o.layers = 10;
  auto m = Model(o);
  auto p = BalancedMemoryPacks(*m, Request(10, PackOf(3)));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->size(), 4u);
  ExpectCovers(*p, 0, 10);
  for (const PackRange& r : *p) EXPECT_LE(m->BackwardMemory(r.begin, r.end, 1), PackOf(3));
  // Even: no pack of 1 next to packs of 3.
  for (const PackRange& r : *p) EXPECT_GE(r.end - r.begin, 2);
}

TEST(PackingTest, BalancedTimeFollowsTheSlowLayers) {
  // vLayers 0-5 take 1 ms, 6-9 take 3 ms: with 4 packs, time-balanced packs
  // put more of the fast vLayers together.
  FakeProfileOptions o;
  o.layers = 10;
  proto::ProfileFile file = MakeFakeProfile(o);
  for (int l = 6; l < 10; ++l) {
    for (auto& row : *file.mutable_profile()->mutable_vlayers(l)->mutable_by_microbatch()) {
      row.set_backward_time_s(row.backward_time_s() * 3);
    }
  }
  auto m = *CostModel::Create(file);
  auto p = BalancedTimePacks(*m, Request(10, PackOf(3)));
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectCovers(*p, 0, 10);
  EXPECT_GE(p->front().end - p->front().begin, p->back().end - p->back().begin);
}

TEST(PackingTest, OptimalNeverWorseThanTheHeuristics) {
  FakeProfileOptions o;
  o.layers = 12;
  proto::ProfileFile file = MakeFakeProfile(o);
  // Uneven times make the choice matter.
  for (int l = 0; l < 12; ++l) {
    for (auto& row : *file.mutable_profile()->mutable_vlayers(l)->mutable_by_microbatch()) {
      row.set_backward_time_s(row.backward_time_s() * (1 + (l * 7) % 5));
    }
  }
  auto m = *CostModel::Create(file);
  PackRequest r = Request(12, PackOf(4));
  r.microbatches = 8;
  r.swap_bandwidth = 1e10;
  auto bottleneck = [&](const Packing& p) {
    double worst = 0;
    for (const PackRange& x : p) worst = std::max(worst, PackCost(*m, r, x.begin, x.end));
    return worst;
  };
  auto optimal = OptimalPacks(*m, r);
  ASSERT_TRUE(optimal.ok()) << optimal.status();
  ExpectCovers(*optimal, 0, 12);
  for (const PackRange& x : *optimal) EXPECT_LE(m->BackwardMemory(x.begin, x.end, 1), r.budget);
  for (auto packer : {GreedyPacks, BalancedMemoryPacks, BalancedTimePacks}) {
    auto p = packer(*m, r);
    ASSERT_TRUE(p.ok());
    EXPECT_LE(bottleneck(*optimal), bottleneck(*p) + 1e-12) << PackingString(*p);
  }
}

TEST(PackingTest, AVLayerThatCannotFitIsNamed) {
  FakeProfileOptions o;
  auto m = Model(o);
  for (auto packer : {GreedyPacks, BalancedMemoryPacks, BalancedTimePacks, OptimalPacks}) {
    auto p = packer(*m, Request(4, PackOf(1) - 1));
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(p.status().message().find("vLayer 0 alone needs"), std::string::npos)
        << p.status();
  }
}

}  // namespace
}  // namespace harmony::planner
