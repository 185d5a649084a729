// The device thread's own time the simulator prices beside the profile's
// compute and link times: each compute's step hand-off, and a weights-in's
// fixed cost per vLayer (the runtime copies a pack's weights one vLayer at a
// time).

#include <string>

#include "gtest/gtest.h"
#include "planner/search/testing/fake_profile.h"
#include "planner/sim/testing/sim_events.h"
#include "planner/sim/simulator.h"

namespace harmony::planner {
namespace {

using testing::Event;
using testing::FakeProfileOptions;
using testing::MakeFakeProfile;

constexpr double kMiB = 1048576.0;

// Every row of the profile with this step hand-off.
proto::ProfileFile WithHandoff(proto::ProfileFile p, double seconds) {
  for (proto::VLayerProfile& v : *p.mutable_profile()->mutable_vlayers()) {
    for (proto::MicrobatchProfile& r : *v.mutable_by_microbatch()) r.set_step_handoff_s(seconds);
  }
  return p;
}

// One device, one fused pack of 2 vLayers, 2 microbatches of 1 sample
// (simulator_test's first timeline), with a hand-off of 0.5 ms.
Config FusedPackOfTwo() {
  Config c;
  c.num_devices = 1;
  c.device_memory = 1 << 30;
  c.minibatch = 2;
  c.backward_packs = {{0, 2}};
  return c;
}

TEST(StepHandoffTest, EachComputeStartsTheHandoffLater) {
  FakeProfileOptions o;  // 1 MiB weights per vLayer, 1 KiB/sample, 1 GB/s.
  o.layers = 2;
  const double h = 0.5e-3;
  auto plain = *CostModel::Create(MakeFakeProfile(o));
  auto handed = *CostModel::Create(WithHandoff(MakeFakeProfile(o), h));
  auto g = BuildTaskGraph(*handed, FusedPackOfTwo());
  ASSERT_TRUE(g.ok()) << g.status();
  auto r = Simulate(*handed, *g, /*keep_events=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  auto base = Simulate(*plain, *g, /*keep_events=*/true);
  ASSERT_TRUE(base.ok()) << base.status();
  const double w = 2 * kMiB / 1e9;  // Weights in: 2 MiB at 1 GB/s.
  const double in = 1024 / 1e9;     // One sample of data.
  const double c0 = 4e-3;           // Backward of 2 vLayers, 1 sample.
  const TraceEvent& first = Event(*r, "backward 0-1 #0");
  EXPECT_NEAR(first.start_s, w + in + h, 1e-12);
  EXPECT_NEAR(first.end_s, w + in + h + c0, 1e-12);
  // Its input was there long before: the hand-off after the first.
  const TraceEvent& second = Event(*r, "backward 0-1 #1");
  EXPECT_NEAR(second.start_s, first.end_s + h, 1e-12);
  EXPECT_NEAR(r->iteration_s, base->iteration_s + 2 * h, 1e-12);
  // Not compute: the devices' compute is the profile's, the hand-offs apart.
  EXPECT_NEAR(r->busy[0][kCompute], 2 * c0, 1e-12);
  EXPECT_DOUBLE_EQ(r->device_compute_s(), base->device_compute_s());
  ASSERT_EQ(r->handoff_s.size(), 1u);
  EXPECT_NEAR(r->handoff_s[0], 2 * h, 1e-15);
  EXPECT_EQ(base->handoff_s[0], 0);
}

// The runtime copies a pack's weights one vLayer at a time, each a host
// transfer with its fixed cost; a vLayer without weights copies nothing.
TEST(StepHandoffTest, WeightsInPayTheFixedCostPerVLayer) {
  FakeProfileOptions o;
  o.layers = 3;
  const double latency = 1e-4;
  proto::ProfileFile p = MakeFakeProfile(o);
  p.mutable_profile()->mutable_bandwidths()->set_transfer_latency_s(latency);
  auto weights_in = [&](const proto::ProfileFile& profile) {
    auto m = *CostModel::Create(profile);
    Config c = FusedPackOfTwo();
    c.backward_packs = {{0, 3}};
    auto g = BuildTaskGraph(*m, c);
    EXPECT_TRUE(g.ok()) << g.status();
    auto r = Simulate(*m, *g, /*keep_events=*/true);
    EXPECT_TRUE(r.ok()) << r.status();
    const TraceEvent& e = Event(*r, "weights in backward 0-2");
    return e.end_s - e.start_s;
  };
  EXPECT_NEAR(weights_in(p), 3 * kMiB / 1e9 + 3 * latency, 1e-12);
  proto::ProfileFile without = p;
  proto::VLayerProfile* middle = without.mutable_profile()->mutable_vlayers(1);
  middle->set_parameter_bytes(0);
  middle->set_gradient_bytes(0);
  EXPECT_NEAR(weights_in(without), 2 * kMiB / 1e9 + 2 * latency, 1e-12);
}

}  // namespace
}  // namespace harmony::planner
