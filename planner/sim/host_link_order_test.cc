// The simulator's order of a device's copies over the host link against
// its compute: a task's sends to the host bounded (Config::
// host_outputs_pending), its host inputs copied in fewer microbatches
// ahead (Config::inputs_ahead), and across vDP backward tasks.

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "planner/search/testing/fake_profile.h"
#include "planner/sim/testing/sim_events.h"
#include "planner/sim/simulator.h"

namespace harmony::planner {
namespace {

using testing::Event;
using testing::FakeProfileOptions;
using testing::MakeFakeProfile;

// One device in vDP over the fake model `m` of 4 vLayers: the forward pack
// [0-1] takes 1 MiB in per sample and sends 2 MiB out (vLayer 0's output as
// the stash of [1-1], vLayer 1's to the fused pack), with sends to the host
// bounded at `pending`; what the forward sends to the host in its
// microbatch 0 into `sent`.
SimResult SimulateSends(const CostModel& m, int minibatch, int pending,
                        uint64_t* sent = nullptr) {
  Config c;
  c.mode = Mode::kVdp;
  c.num_devices = 1;
  c.device_memory = 1ull << 34;
  c.minibatch = minibatch;
  c.forward_packs = {{0, 2}};
  c.backward_packs = {{0, 1}, {1, 2}, {2, 4}};
  c.host_outputs_pending = pending;
  auto g = BuildTaskGraph(m, c);
  EXPECT_TRUE(g.ok()) << g.status();
  if (sent != nullptr) {
    *sent = 0;
    for (const Task& t : g->tasks) {
      if (t.kind != TaskKind::kForward) continue;
      for (const Transfer& x : t.transfers) {
        const bool out =
            x.kind == TransferKind::kActivationsOut || x.kind == TransferKind::kStashOut;
        if (out && x.channel == Channel::kHost && x.microbatch == 0) *sent += x.bytes;
      }
    }
  }
  auto r = Simulate(m, *g);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

// Where the link is slower than the compute, a task's sends to the host
// queue: unbounded, the device holds more of them the more microbatches it
// runs; bounded (Config::host_outputs_pending), at most that many, whatever
// the minibatch, and the peak stays put.
TEST(SimulatorTest, HostSendsPendingAreBoundedPerTask) {
  FakeProfileOptions o;
  o.layers = 4;
  o.activation_bytes = 1 << 20;  // 1 MiB per sample per vLayer, 10.5 ms on the link.
  o.bandwidth = 1e8;
  auto m = *CostModel::Create(MakeFakeProfile(o));
  auto run = [&](int minibatch, int pending) { return SimulateSends(*m, minibatch, pending); };
  const SimResult free16 = run(16, 0), free32 = run(32, 0);
  const SimResult bound16 = run(16, 4), bound32 = run(32, 4);
  // Unbounded, the forward's sends pile up: one more pending per two
  // microbatches.
  EXPECT_GE(free16.host_outputs_pending, 6) << free16.host_outputs_pending;
  EXPECT_GE(free32.host_outputs_pending, free16.host_outputs_pending + 6)
      << free32.host_outputs_pending;
  EXPECT_GE(free32.device_peak[0], free16.device_peak[0] + (12u << 20));
  // Bounded: at most 3 behind while the next computes, the peak the same
  // at twice the minibatch and below the unbounded one.
  EXPECT_LE(bound16.host_outputs_pending, 3);
  EXPECT_LE(bound32.host_outputs_pending, 3);
  EXPECT_EQ(bound16.device_peak[0], bound32.device_peak[0]);
  EXPECT_LE(bound16.device_peak[0] + (4u << 20), free16.device_peak[0]);
  // It costs time, not a pile-up: the forward now ends when its last sends
  // do, and the backward that reads them back no longer starts while they
  // drain (13% here; the search bounds only what does not fit without).
  EXPECT_GT(bound32.iteration_s, free32.iteration_s);
  EXPECT_LT(bound32.iteration_s, free32.iteration_s * 1.2);
  // A bound at or above what was pending changes nothing.
  const SimResult loose = run(16, free16.host_outputs_pending + 1);
  EXPECT_EQ(loose.device_peak[0], free16.device_peak[0]);
  EXPECT_DOUBLE_EQ(loose.iteration_s, free16.iteration_s);
}

// Bounded, a task's sends to the host are held as the runtime guarantees,
// not only as long as the link needs: the runtime computes microbatch m + N
// once m's have left, and its copy thread may fall that far behind on a
// loaded host however fast the link (host_link_order_test in the runtime
// saw sends two microbatches late on 2 cores, 448 B over the planned peak).
// So with a link that takes no time a bound of 7 holds two forward
// microbatches' sends more than a bound of 5, and a bound of 1 no more than
// unbounded.
TEST(SimulatorTest, BoundedHostSendsAreHeldUntilTheComputeThatWaitsForThem) {
  FakeProfileOptions o;
  o.layers = 4;
  o.activation_bytes = 1 << 20;
  o.bandwidth = 1e13;
  auto m = *CostModel::Create(MakeFakeProfile(o));
  uint64_t sent = 0;  // By a forward microbatch, to the host.
  auto run = [&](int pending) { return SimulateSends(*m, 16, pending, &sent); };
  const SimResult free = run(0), one = run(1), five = run(5), seven = run(7);
  ASSERT_GT(sent, 0u);
  EXPECT_LE(one.device_peak[0], free.device_peak[0]);
  // (From 5 on the forward's peak is the device's: below, the backward's,
  // whose sends, the gradients of its inputs, are bounded alike.)
  EXPECT_EQ(seven.device_peak[0], five.device_peak[0] + 2 * sent)
      << seven.device_peak[0] << " vs " << five.device_peak[0] << " + 2 x " << sent;
}

// Host inputs copied in fewer microbatches ahead (Config::inputs_ahead):
// microbatch m's copies start once microbatch m - ahead - 1 has computed,
// so a backward holds fewer stashes at once.
TEST(SimulatorTest, FewerInputsAheadHoldLess) {
  FakeProfileOptions o;
  o.layers = 4;
  o.activation_bytes = 1 << 20;     // 1 ms per MiB on the link...
  o.forward_s_per_sample = 5e-3;    // ... against 10 ms of backward per vLayer.
  auto m = *CostModel::Create(MakeFakeProfile(o));
  auto run = [&](int ahead) {
    Config c;
    c.mode = Mode::kVdp;
    c.num_devices = 1;
    c.device_memory = 1ull << 34;
    c.minibatch = 16;
    c.forward_packs = {{0, 2}};
    c.backward_packs = {{0, 1}, {1, 2}, {2, 4}};
    c.inputs_ahead = ahead;
    auto g = BuildTaskGraph(*m, c);
    EXPECT_TRUE(g.ok()) << g.status();
    auto r = Simulate(*m, *g, true);
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  };
  const SimResult four = run(0), one = run(1);
  // The most a microbatch copies in: [1-1]'s stash and its output's gradient.
  EXPECT_EQ(four.largest_host_input, 2u << 20);
  // Each microbatch's copy of the stash of [1-1] starts once the one two
  // before it has computed.
  for (int mb = 2; mb < 16; ++mb) {
    const TraceEvent& in = Event(one, absl::StrCat("stash in backward 1-1 #", mb));
    const TraceEvent& before = Event(one, absl::StrCat("backward 1-1 #", mb - 2));
    EXPECT_GE(in.start_s, before.end_s - 1e-12) << mb;
  }
  // By default some start earlier, and the device holds more.
  int early = 0;
  for (int mb = 2; mb < 16; ++mb) {
    early += Event(four, absl::StrCat("stash in backward 1-1 #", mb)).start_s <
             Event(four, absl::StrCat("backward 1-1 #", mb - 2)).end_s - 1e-12;
  }
  EXPECT_GT(early, 0);
  EXPECT_LT(one.device_peak[0], four.device_peak[0]);
}

// After a vDP backward, the next backward's first `inputs_ahead`
// microbatches' stashes copy in during its last microbatches: microbatch
// j's once microbatch n - ahead - 1 + j has computed (the runtime's
// TaskInputs::Follow), not after the task as the one after them.
TEST(SimulatorTest, VdpNextBackwardsInputsCopyInDuringTheLastMicrobatches) {
  FakeProfileOptions o;
  o.layers = 4;
  auto m = *CostModel::Create(MakeFakeProfile(o));
  Config c;
  c.mode = Mode::kVdp;
  c.num_devices = 2;
  c.device_memory = 1 << 30;
  c.minibatch = 8;  // 4 microbatches per device and task.
  c.forward_microbatch = 1;
  c.backward_microbatch = 1;
  c.inputs_ahead = 1;
  c.forward_packs = {{0, 2}, {2, 3}};
  c.backward_packs = {{0, 2}, {2, 3}, {3, 4}};
  auto r = Simulate(*m, *BuildTaskGraph(*m, c), true);
  ASSERT_TRUE(r.ok()) << r.status();
  auto on_device_0 = [&](const std::string& name) { return Event(*r, name, 0); };
  // The first pack's input is the data.
  using Pair = std::pair<std::string, std::string>;
  for (const auto& [task, next] :
       {Pair{"3-3", "stash in backward 2-2"}, Pair{"2-2", "data in backward 0-1"}}) {
    SCOPED_TRACE(task);
    const TraceEvent first = on_device_0(absl::StrCat(next, " #0"));
    const TraceEvent second = on_device_0(absl::StrCat(next, " #1"));
    EXPECT_GE(first.start_s, on_device_0(absl::StrCat("backward ", task, " #2")).end_s - 1e-12);
    EXPECT_LT(first.start_s, on_device_0(absl::StrCat("backward ", task, " #3")).end_s);
    // The one after comes with the task's end, before its reduce.
    EXPECT_GE(second.start_s, on_device_0(absl::StrCat("backward ", task, " #3")).end_s - 1e-12);
  }
}

}  // namespace
}  // namespace harmony::planner
