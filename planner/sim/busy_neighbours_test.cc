// Devices that share compute (virtual CPU devices on one host's cores,
// partitions of one GPU) slow each other only while both compute: the
// simulator weighs each compute between the profile's time alone and its
// time beside busy devices by how many devices compute beside it.

#include <algorithm>

#include "gtest/gtest.h"
#include "planner/search/testing/fake_profile.h"
#include "planner/sim/simulator.h"

namespace harmony::planner {
namespace {

// The fake chain of 4 vLayers, profiled on `devices` devices, its times
// beside the busy others `slowdown` x its times alone.
std::shared_ptr<const CostModel> Model(double slowdown, int devices = 2) {
  testing::FakeProfileOptions o;
  o.layers = 4;
  proto::ProfileFile f = testing::MakeFakeProfile(o);
  f.mutable_profile()->set_num_devices(devices);
  for (proto::VLayerProfile& v : *f.mutable_profile()->mutable_vlayers()) {
    for (proto::MicrobatchProfile& r : *v.mutable_by_microbatch()) {
      r.set_forward_time_busy_s(r.forward_time_s() * slowdown);
      r.set_backward_time_busy_s(r.backward_time_s() * slowdown);
    }
  }
  return *CostModel::Create(f);
}

SimResult Simulated(const CostModel& m, const Config& c) {
  absl::StatusOr<TaskGraph> g = BuildTaskGraph(m, c);
  EXPECT_TRUE(g.ok()) << g.status();
  absl::StatusOr<SimResult> r = Simulate(m, *g, /*keep_events=*/true);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

Config TwoDevices() {
  Config c;
  c.num_devices = 2;
  c.device_memory = 1 << 30;
  c.forward_microbatch = 1;
  c.backward_microbatch = 1;
  return c;
}

TEST(BusyNeighboursTest, CostModelKeepsTheTimesAloneBesideTheBusyOnes) {
  auto m = Model(2.0);
  EXPECT_EQ(m->busy_neighbours(), 1);
  EXPECT_NEAR(m->ForwardSeconds(0, 4, 2, /*alone=*/true), 8e-3, 1e-12);
  EXPECT_NEAR(m->ForwardSeconds(0, 4, 2), 16e-3, 1e-12);
  EXPECT_NEAR(m->BackwardSeconds(1, 3, 1, /*alone=*/true), 4e-3, 1e-12);
  EXPECT_NEAR(m->BackwardSeconds(1, 3, 1), 8e-3, 1e-12);
  EXPECT_NEAR(m->KeptBackwardSeconds(0, 1, 1, /*alone=*/true), 1e-3, 1e-12);
  EXPECT_NEAR(m->KeptBackwardSeconds(0, 1, 1), 2e-3, 1e-12);
  EXPECT_EQ(Model(2.0, /*devices=*/1)->busy_neighbours(), 0);
}

// A plan whose one pack runs on one device of two: nothing computes beside
// it, so it runs at its time alone (it ran at the busy time before: a
// single-pack bidirectional LSTM on 2 CPU devices simulated 1.14x slow).
TEST(BusyNeighboursTest, ADeviceComputingAloneRunsAtItsTimeAlone) {
  Config c = TwoDevices();
  c.minibatch = 4;
  c.backward_packs = {{0, 4}};
  const SimResult alone = Simulated(*Model(1.0), c);
  const SimResult slowed = Simulated(*Model(2.0), c);
  EXPECT_NEAR(alone.device_compute_s(), 4 * 8e-3, 1e-12);
  EXPECT_NEAR(slowed.device_compute_s(), alone.device_compute_s(), 1e-12);
  EXPECT_NEAR(slowed.iteration_s, alone.iteration_s, 1e-12);
}

// vDP: both devices compute side by side at the busy time, all but the
// start and end, where one device's weights wait behind the other's on the
// shared link (4 MiB at 1 GB/s).
TEST(BusyNeighboursTest, DevicesComputingSideBySideRunAtTheBusyTime) {
  Config c = TwoDevices();
  c.mode = Mode::kVdp;
  c.minibatch = 8;
  c.backward_packs = {{0, 4}};
  const SimResult alone = Simulated(*Model(1.0), c);
  const SimResult slowed = Simulated(*Model(2.0), c);
  EXPECT_GT(slowed.device_compute_s(), 1.9 * alone.device_compute_s());
  EXPECT_LT(slowed.device_compute_s(), 2 * alone.device_compute_s());
  EXPECT_GT(slowed.iteration_s, 1.5 * alone.iteration_s);
}

// A pipeline: device 1 waits for device 0's first forward, device 0 for
// device 1's last backward. Computes there run alone; those side by side
// are slowed: the total lies strictly between, each compute between its
// time alone and its time beside a busy device, and the iteration is
// shorter than with every compute slowed.
TEST(BusyNeighboursTest, APipelinesFillAndDrainRunAlone) {
  Config c = TwoDevices();
  c.mode = Mode::kVpp;
  c.minibatch = 8;
  c.forward_packs = {{0, 2}};
  c.backward_packs = {{0, 2}, {2, 4}};
  const SimResult alone = Simulated(*Model(1.0), c);
  const SimResult slowed = Simulated(*Model(2.0), c);
  const double a = alone.device_compute_s();
  EXPECT_GT(slowed.device_compute_s(), a * 1.05);
  EXPECT_LT(slowed.device_compute_s(), a * 1.95);
  ASSERT_EQ(alone.events.size(), slowed.events.size());
  int between = 0;
  for (size_t i = 0; i < slowed.events.size(); ++i) {
    const TraceEvent& s = slowed.events[i];
    const TraceEvent& e = alone.events[i];
    if (s.device < 0 || s.stream != kCompute) continue;
    const double took = s.end_s - s.start_s, was = e.end_s - e.start_s;
    EXPECT_GE(took, was - 1e-12) << s.name;
    EXPECT_LE(took, 2 * was + 1e-12) << s.name;
    if (took > was * 1.01 && took < was * 1.99) ++between;
  }
  EXPECT_GT(between, 0);
  // Every compute at its busy time, as the simulator had it before: a
  // profile whose times alone are those times.
  testing::FakeProfileOptions o;
  o.layers = 4;
  o.forward_s_per_sample = 2e-3;
  auto doubled = *CostModel::Create(testing::MakeFakeProfile(o));
  const SimResult all_busy = Simulated(*doubled, c);
  EXPECT_NEAR(all_busy.device_compute_s(), 2 * a, 1e-12);
  EXPECT_LT(slowed.iteration_s, all_busy.iteration_s);
  EXPECT_GT(slowed.iteration_s, alone.iteration_s);
}

}  // namespace
}  // namespace harmony::planner
