#include "planner/search/task_graph.h"

#include <algorithm>
#include <map>

#include "gtest/gtest.h"
#include "planner/search/testing/fake_profile.h"

namespace harmony::planner {
namespace {

using testing::FakeProfileOptions;
using testing::MakeFakeProfile;

std::shared_ptr<const CostModel> Model(int layers) {
  FakeProfileOptions o;
  o.layers = layers;
  return *CostModel::Create(MakeFakeProfile(o));
}

// Transfers of `kind` on task `t`.
std::vector<Transfer> Of(const Task& t, TransferKind kind) {
  std::vector<Transfer> out;
  for (const Transfer& x : t.transfers) {
    if (x.kind == kind) out.push_back(x);
  }
  return out;
}

// The peer task of the first transfer of `kind`, or -100 when there is none.
int PeerOf(const Task& t, TransferKind kind) {
  std::vector<Transfer> of = Of(t, kind);
  return of.empty() ? -100 : of.front().peer_task;
}

Channel ChannelOf(const Task& t, TransferKind kind) {
  std::vector<Transfer> of = Of(t, kind);
  return of.empty() ? Channel::kLocal : of.front().channel;
}

// The example of reference/harmony-original.md §2: N = 2, backward packs
// [0-3] [4-7] [8-11], forward packs [0-3] [4-7], U = 2, D = 4.
Config HandWorkedVpp() {
  Config c;
  c.mode = Mode::kVpp;
  c.num_devices = 2;
  c.minibatch = 4;
  c.forward_microbatch = 2;
  c.backward_microbatch = 2;
  c.forward_packs = {{0, 4}, {4, 8}};
  c.backward_packs = {{0, 4}, {4, 8}, {8, 12}};
  return c;
}

TEST(TaskGraphTest, HandWorkedVppExample) {
  auto m = Model(12);
  absl::StatusOr<TaskGraph> g = BuildTaskGraph(*m, HandWorkedVpp());
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(ValidateTaskGraph(*m, *g).ok()) << ValidateTaskGraph(*m, *g);
  const auto& t = g->tasks;
  ASSERT_EQ(t.size(), 8u);
  // Order, kinds, packs and devices: t0 F[0-3]@0, t1 F[4-7]@1, t2 B[8-11]@0
  // (fused), t3 U, t4 B[4-7]@1, t5 U, t6 B[0-3]@0, t7 U.
  const std::vector<std::tuple<TaskKind, int, int>> expected = {
      {TaskKind::kForward, 0, 0},  {TaskKind::kForward, 4, 1},
      {TaskKind::kBackward, 8, 0}, {TaskKind::kUpdate, 8, 0},
      {TaskKind::kBackward, 4, 1}, {TaskKind::kUpdate, 4, 1},
      {TaskKind::kBackward, 0, 0}, {TaskKind::kUpdate, 0, 0}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(t[i].kind, std::get<0>(expected[i])) << i;
    EXPECT_EQ(t[i].vlayers.begin, std::get<1>(expected[i])) << i;
    EXPECT_EQ(t[i].device, std::get<2>(expected[i])) << i;
  }
  EXPECT_TRUE(t[2].fused_loss);
  EXPECT_EQ(t[0].microbatches.size(), 2u);

  // t0: data in, activations to t1 device-to-device per microbatch,
  // prefetch of t2's weights.
  EXPECT_EQ(Of(t[0], TransferKind::kDataIn).size(), 2u);
  auto out0 = Of(t[0], TransferKind::kActivationsOut);
  ASSERT_EQ(out0.size(), 2u);
  EXPECT_EQ(out0[0].channel, Channel::kPeer);
  EXPECT_EQ(out0[0].peer_device, 1);
  EXPECT_EQ(out0[0].peer_task, 1);
  EXPECT_EQ(out0[0].bytes, 2 * 1024u);  // One vLayer output, 2 samples.
  auto prefetch0 = Of(t[0], TransferKind::kPrefetchWeights);
  ASSERT_EQ(prefetch0.size(), 1u);
  EXPECT_EQ(prefetch0[0].peer_task, 2);
  EXPECT_EQ(prefetch0[0].bytes, 4u << 20);

  // t1: stashes backward pack [4-7]'s input for t4, sends to the fused t2,
  // and keeps its weights for t4 (same pack, next on device 1).
  auto stash = Of(t[1], TransferKind::kStashOut);
  ASSERT_EQ(stash.size(), 2u);
  EXPECT_EQ(stash[0].peer_task, 4);
  EXPECT_EQ(PeerOf(t[1], TransferKind::kActivationsOut), 2);
  auto keep = Of(t[1], TransferKind::kKeepResident);
  ASSERT_EQ(keep.size(), 1u);
  EXPECT_EQ(keep[0].peer_task, 4);
  EXPECT_TRUE(Of(t[4], TransferKind::kWeightsIn).empty());

  // t2 (fused): weights in, activations from t1, gradients to t4 and its
  // own gradients to update t3; prefetches t6.
  EXPECT_EQ(Of(t[2], TransferKind::kWeightsIn).size(), 1u);
  EXPECT_EQ(PeerOf(t[2], TransferKind::kActivationsIn), 1);
  EXPECT_EQ(PeerOf(t[2], TransferKind::kActivationsOut), 4);
  auto grads = Of(t[2], TransferKind::kGradientsOut);
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_EQ(grads[0].peer_task, 3);
  EXPECT_EQ(grads[0].bytes, 4u << 20);
  EXPECT_EQ(PeerOf(t[2], TransferKind::kPrefetchWeights), 6);

  // t4: stash in from t1, gradients in from t2, out to t6.
  EXPECT_EQ(PeerOf(t[4], TransferKind::kStashIn), 1);
  EXPECT_EQ(PeerOf(t[4], TransferKind::kActivationsOut), 6);
  // t6: the first pack recomputes from the data, no stash.
  EXPECT_TRUE(Of(t[6], TransferKind::kStashIn).empty());
  EXPECT_EQ(Of(t[6], TransferKind::kDataIn).size(), 2u);
  EXPECT_TRUE(Of(t[6], TransferKind::kActivationsOut).empty());
  // Updates follow their backward task.
  EXPECT_EQ(t[3].depends_on, std::vector<int>{2});
}

TEST(TaskGraphTest, VdpEveryDeviceRunsEveryPackOnItsShare) {
  auto m = Model(6);
  Config c;
  c.mode = Mode::kVdp;
  c.num_devices = 2;
  c.minibatch = 5;  // Shares 3 and 2.
  c.forward_microbatch = 2;
  c.backward_microbatch = 2;
  c.forward_packs = {{0, 3}};
  c.backward_packs = {{0, 3}, {3, 6}};
  absl::StatusOr<TaskGraph> g = BuildTaskGraph(*m, c);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(ValidateTaskGraph(*m, *g).ok()) << ValidateTaskGraph(*m, *g);
  // F@0, F@1, B1@0, B1@1, U1, B0@0, B0@1, U0.
  ASSERT_EQ(g->tasks.size(), 8u);
  const Task& f0 = g->tasks[0];
  const Task& f1 = g->tasks[1];
  ASSERT_EQ(f0.microbatches.size(), 2u);  // Samples 0-1, 2.
  EXPECT_EQ(f0.microbatches[1].offset, 2);
  EXPECT_EQ(f0.microbatches[1].size, 1);
  ASSERT_EQ(f1.microbatches.size(), 1u);  // Samples 3-4.
  EXPECT_EQ(f1.microbatches[0].offset, 3);
  // Activations between packs on the same device go through the host.
  EXPECT_EQ(ChannelOf(f0, TransferKind::kActivationsOut), Channel::kHost);
  // Each backward task reduces its gradients; only device 0 sends them out.
  for (int i : {2, 3, 5, 6}) {
    const Task& b = g->tasks[i];
    EXPECT_EQ(Of(b, TransferKind::kGradientReduce).size(), 1u) << i;
    EXPECT_EQ(Of(b, TransferKind::kGradientsOut).size(), b.device == 0 ? 1u : 0u) << i;
    // A reduce onto device 0: device 1 sends its gradients once, device 0
    // receives (its transfer carries no bytes of its own).
    for (const Transfer& x : b.transfers) {
      if (x.kind != TransferKind::kGradientReduce) continue;
      EXPECT_EQ(x.bytes, b.device == 0 ? 0u : m->GradientBytes(b.vlayers.begin, b.vlayers.end))
          << i;
      EXPECT_EQ(x.peer_device, b.device == 0 ? -1 : 0) << i;
    }
  }
  EXPECT_EQ(g->tasks[4].kind, TaskKind::kUpdate);
  EXPECT_EQ(g->tasks[4].depends_on, (std::vector<int>{2, 3}));
}

// With local_activations, what a vDP device's packs pass to each other
// stays on it (both ways: activations forward, their gradients backward);
// only the stashes and the fused pack's input at another microbatch size
// cross the host link.
TEST(TaskGraphTest, VdpLocalActivationsStayOnTheDevice) {
  auto m = Model(6);
  Config c;
  c.mode = Mode::kVdp;
  c.num_devices = 2;
  c.minibatch = 8;
  c.forward_microbatch = 2;
  c.backward_microbatch = 2;
  c.forward_packs = {{0, 2}, {2, 4}};
  c.backward_packs = {{0, 2}, {2, 4}, {4, 6}};
  c.local_activations = true;
  absl::StatusOr<TaskGraph> g = BuildTaskGraph(*m, c);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(ValidateTaskGraph(*m, *g).ok()) << ValidateTaskGraph(*m, *g);
  int local = 0;
  for (const Task& t : g->tasks) {
    for (const Transfer& x : t.transfers) {
      if (x.kind != TransferKind::kActivationsIn && x.kind != TransferKind::kActivationsOut) {
        continue;
      }
      EXPECT_EQ(x.channel, Channel::kLocal) << "task " << t.id;
      EXPECT_EQ(g->tasks[x.peer_task].device, t.device) << "task " << t.id;
      ++local;
    }
  }
  // 2 devices x 2 microbatches x (F0->F1, F1->B2 (fused), B2->B1, B1->B0),
  // each out and in.
  EXPECT_EQ(local, 2 * 2 * 4 * 2);
  // Without it, the same graph sends them all through the host.
  c.local_activations = false;
  g = BuildTaskGraph(*m, c);
  ASSERT_TRUE(g.ok()) << g.status();
  for (const Task& t : g->tasks) {
    for (const Transfer& x : t.transfers) {
      if (x.kind == TransferKind::kActivationsOut) EXPECT_EQ(x.channel, Channel::kHost);
    }
  }
  // Forward at a larger microbatch than backward: the fused pack's input
  // still goes through the host (the microbatches differ), the rest stays.
  c.local_activations = true;
  c.forward_microbatch = 4;
  g = BuildTaskGraph(*m, c);
  ASSERT_TRUE(g.ok()) << g.status();
  for (const Task& t : g->tasks) {
    for (const Transfer& x : t.transfers) {
      if (x.kind != TransferKind::kActivationsOut) continue;
      const bool to_fused = g->tasks[x.peer_task].fused_loss;
      EXPECT_EQ(x.channel, to_fused ? Channel::kHost : Channel::kLocal) << "task " << t.id;
    }
  }
}

// In waves, vDP runs forward and backward over every pack once per wave,
// each on its slice of the minibatch; every wave's gradients go to the one
// update of their pack, which follows the last wave's backward of it, and
// each wave's reduction sums only that wave's gradients.
TEST(TaskGraphTest, VdpWavesPassOverEveryPackPerSlice) {
  auto m = Model(6);
  Config c;
  c.mode = Mode::kVdp;
  c.num_devices = 2;
  c.minibatch = 13;  // Waves of 5, 4 and 4 samples.
  c.forward_microbatch = 2;
  c.backward_microbatch = 2;
  c.forward_packs = {{0, 2}, {2, 4}};
  c.backward_packs = {{0, 2}, {2, 4}, {4, 6}};
  c.local_activations = true;
  c.peer_weights = true;
  c.waves = 3;
  EXPECT_EQ(WaveSamples(c, 0).first, 0);
  EXPECT_EQ(WaveSamples(c, 0).size, 5);
  EXPECT_EQ(WaveSamples(c, 1).first, 5);
  EXPECT_EQ(WaveSamples(c, 2).first, 9);
  EXPECT_EQ(WaveSamples(c, 2).size, 4);
  absl::StatusOr<TaskGraph> g = BuildTaskGraph(*m, c);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(ValidateTaskGraph(*m, *g).ok()) << ValidateTaskGraph(*m, *g);
  // 3 waves x 2 devices x (2 forward + 3 backward) tasks, 3 updates.
  int forwards = 0, backwards = 0, updates = 0;
  std::map<int, int> update_of;  // Pack -> its update task.
  for (const Task& t : g->tasks) {
    forwards += t.kind == TaskKind::kForward;
    backwards += t.kind == TaskKind::kBackward;
    if (t.kind == TaskKind::kUpdate) {
      ++updates;
      update_of[t.pack] = t.id;
    }
  }
  EXPECT_EQ(forwards, 3 * 2 * 2);
  EXPECT_EQ(backwards, 3 * 2 * 3);
  EXPECT_EQ(updates, 3);
  for (const Task& t : g->tasks) {
    if (t.kind != TaskKind::kBackward) continue;
    // Each wave's microbatches lie in its slice.
    const int wave = t.microbatches.front().offset < 5 ? 0 : t.microbatches.front().offset < 9 ? 1 : 2;
    const WaveSlice slice = WaveSamples(c, wave);
    for (const Microbatch& mb : t.microbatches) {
      EXPECT_GE(mb.offset, slice.first) << "task " << t.id;
      EXPECT_LE(mb.offset + mb.size, slice.first + slice.size) << "task " << t.id;
    }
    // Every wave's device 0 sends its pack's gradients to the one update,
    // which comes after it; device 1 hands its gradients to device 0's
    // task of the same wave.
    EXPECT_LT(t.id, update_of[t.pack]);
    if (t.device == 0) {
      EXPECT_EQ(PeerOf(t, TransferKind::kGradientsOut), update_of[t.pack]) << "task " << t.id;
    } else {
      const int to = PeerOf(t, TransferKind::kGradientReduce);
      ASSERT_GE(to, 0) << "task " << t.id;
      EXPECT_EQ(g->tasks[to].device, 0);
      EXPECT_EQ(g->tasks[to].pack, t.pack);
      EXPECT_EQ(g->tasks[to].microbatches.front().offset < 5,
                t.microbatches.front().offset < 5) << "task " << t.id;
    }
    // Activations stay on the device within a wave.
    for (const Transfer& x : t.transfers) {
      if (x.kind == TransferKind::kActivationsIn) EXPECT_EQ(x.channel, Channel::kLocal);
    }
  }
  // Updates only after the last wave: the first update follows every
  // backward task.
  int last_backward = 0;
  for (const Task& t : g->tasks) {
    if (t.kind == TaskKind::kBackward && t.pack == 2) last_backward = std::max(last_backward, t.id);
  }
  EXPECT_GT(update_of[2], last_backward);
  // Waves are vDP Harmony's, and each needs a sample per device.
  Config vpp = c;
  vpp.mode = Mode::kVpp;
  EXPECT_NE(BuildTaskGraph(*m, vpp).status().message().find("only in Harmony's vDP"),
            std::string::npos);
  Config thin = c;
  thin.waves = 7;
  EXPECT_NE(BuildTaskGraph(*m, thin).status().message().find("at most 6 waves"),
            std::string::npos)
      << BuildTaskGraph(*m, thin).status();
}

// With peer_weights, vDP device 0 swaps every pack's weights in from the
// host and the other devices copy the parameters from its task at the same
// place in its list, taking only the buffers from the host.
TEST(TaskGraphTest, VdpPeerWeightsCrossTheHostLinkOnce) {
  FakeProfileOptions o;
  o.layers = 6;
  proto::ProfileFile profile = MakeFakeProfile(o);
  profile.mutable_profile()->mutable_vlayers(2)->set_buffer_bytes(4096);
  auto m = *CostModel::Create(profile);
  Config c;
  c.mode = Mode::kVdp;
  c.num_devices = 3;
  c.minibatch = 12;
  c.forward_microbatch = 2;
  c.backward_microbatch = 2;
  c.forward_packs = {{0, 2}, {2, 4}};
  c.backward_packs = {{0, 2}, {2, 4}, {4, 6}};
  c.peer_weights = true;
  absl::StatusOr<TaskGraph> g = BuildTaskGraph(*m, c);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(ValidateTaskGraph(*m, *g).ok()) << ValidateTaskGraph(*m, *g);
  const std::vector<int> first = g->DeviceTasks(0);
  uint64_t host = 0, peer = 0;
  for (int d = 0; d < c.num_devices; ++d) {
    const std::vector<int> list = g->DeviceTasks(d);
    ASSERT_EQ(list.size(), first.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const Task& t = g->tasks[list[i]];
      const uint64_t weights = m->WeightBytes(t.vlayers.begin, t.vlayers.end);
      const uint64_t buffers = m->BufferBytes(t.vlayers.begin, t.vlayers.end);
      uint64_t from_host = 0, from_peer = 0;
      for (const Transfer& x : Of(t, TransferKind::kWeightsIn)) {
        if (x.channel == Channel::kPeer) {
          EXPECT_EQ(x.peer_device, 0) << "task " << t.id;
          from_peer += x.bytes;
        } else {
          EXPECT_EQ(x.channel, Channel::kHost) << "task " << t.id;
          from_host += x.bytes;
        }
      }
      host += from_host;
      peer += from_peer;
      if (Of(t, TransferKind::kWeightsIn).empty()) continue;  // Kept from the last forward.
      if (d == 0) {
        EXPECT_EQ(from_host, weights) << "task " << t.id;
        EXPECT_EQ(from_peer, 0u) << "task " << t.id;
      } else {
        EXPECT_EQ(from_host, buffers) << "task " << t.id;
        EXPECT_EQ(from_peer, weights - buffers) << "task " << t.id;
        EXPECT_EQ(g->tasks[first[i]].vlayers, t.vlayers);
      }
    }
  }
  // Each device's list: forward 0-1, 2-3, the fused 4-5, backward 2-3, 0-1.
  const uint64_t passes = m->WeightBytes(0, 4) * 2 + m->WeightBytes(4, 6);
  const uint64_t buffer_passes = 4096 * 2;  // vLayer 2 forward and backward.
  EXPECT_EQ(host, passes + 2 * buffer_passes);
  EXPECT_EQ(peer, 2 * (passes - buffer_passes));

  // A copy from the device itself, or from a task of another pack, is caught.
  TaskGraph bad = *g;
  const int copier = bad.DeviceTasks(1).front();
  for (Transfer& x : bad.tasks[copier].transfers) {
    if (x.kind == TransferKind::kWeightsIn && x.channel == Channel::kPeer) x.peer_device = 1;
  }
  EXPECT_FALSE(ValidateTaskGraph(*m, bad).ok());
  bad = *g;
  for (Transfer& x : bad.tasks[first.front()].transfers) {
    if (x.kind == TransferKind::kWeightsIn) x.channel = Channel::kPeer;
  }
  EXPECT_FALSE(ValidateTaskGraph(*m, bad).ok());
}

// A pack summed on the host sends its gradients after every microbatch
// (all but the last as transfers of that microbatch, the last with the
// task's own); only in Harmony's vPP, and sized to the backward packs.
TEST(TaskGraphTest, HostSummedPacksSendGradientsAfterEachMicrobatch) {
  auto m = Model(12);
  Config c = HandWorkedVpp();
  c.minibatch = 6;  // 3 microbatches of 2.
  c.host_sums = {false, true, false};
  auto g = BuildTaskGraph(*m, c);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(ValidateTaskGraph(*m, *g).ok()) << ValidateTaskGraph(*m, *g);
  int summed = 0;
  for (const Task& t : g->tasks) {
    if (t.kind != TaskKind::kBackward) continue;
    std::vector<Transfer> out = Of(t, TransferKind::kGradientsOut);
    if (t.pack != 1) {
      ASSERT_EQ(out.size(), 1u) << "task " << t.id;
      EXPECT_EQ(out[0].microbatch, -1);
      continue;
    }
    ++summed;
    ASSERT_EQ(out.size(), 3u) << "task " << t.id;
    EXPECT_EQ(out[0].microbatch, 0);
    EXPECT_EQ(out[1].microbatch, 1);
    EXPECT_EQ(out[2].microbatch, -1);
    for (const Transfer& x : out) {
      EXPECT_EQ(x.bytes, m->GradientBytes(4, 8));
      EXPECT_EQ(g->tasks[x.peer_task].kind, TaskKind::kUpdate);
    }
  }
  EXPECT_EQ(summed, 1);

  Config wrong = c;
  wrong.host_sums = {true, false};
  EXPECT_NE(BuildTaskGraph(*m, wrong).status().message().find("host sums are given for 2"),
            std::string::npos);
  wrong = c;
  wrong.mode = Mode::kVdp;
  EXPECT_NE(BuildTaskGraph(*m, wrong).status().message().find("only in Harmony's vPP"),
            std::string::npos);
}

// Late weights (Config::late_forward / late_backward): a late pack's task
// swaps its weights in when it starts, the others are prefetched by the
// task before; lists of the wrong size, or late packs in a single-buffered
// config, are refused.
TEST(TaskGraphTest, LateWeightsSwapInAtTheTaskStart) {
  auto m = Model(12);
  Config c = HandWorkedVpp();
  c.late_backward = {false, false, true};  // The fused pack, t2.
  absl::StatusOr<TaskGraph> g = BuildTaskGraph(*m, c);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(ValidateTaskGraph(*m, *g).ok()) << ValidateTaskGraph(*m, *g);
  const auto& t = g->tasks;
  // t0 prefetched t2's weights before; now t2 swaps them in itself.
  EXPECT_TRUE(Of(t[0], TransferKind::kPrefetchWeights).empty());
  EXPECT_EQ(PeerOf(t[2], TransferKind::kWeightsIn), -1);
  // t6 (backward 0-3 on device 0) is still prefetched, by t2.
  EXPECT_EQ(PeerOf(t[2], TransferKind::kPrefetchWeights), 6);
  EXPECT_EQ(PeerOf(t[6], TransferKind::kWeightsIn), 2);

  Config wrong = c;
  wrong.late_forward = {true};
  EXPECT_NE(BuildTaskGraph(*m, wrong).status().message().find(
                "late weights are given for 1 forward packs; there are 2"),
            std::string::npos)
      << BuildTaskGraph(*m, wrong).status();
  wrong = c;
  wrong.prefetch = false;
  EXPECT_NE(BuildTaskGraph(*m, wrong).status().message().find("single-buffered"),
            std::string::npos);
}

TEST(TaskGraphTest, ValidatorCatchesBrokenGraphs) {
  auto m = Model(12);
  TaskGraph good = *BuildTaskGraph(*m, HandWorkedVpp());

  TaskGraph lost = good;  // A receive goes missing.
  auto& in = lost.tasks[1].transfers;
  in.erase(std::remove_if(in.begin(), in.end(), [](const Transfer& x) {
             return x.kind == TransferKind::kActivationsIn;
           }),
           in.end());
  absl::Status s = ValidateTaskGraph(*m, lost);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("task 0"), std::string::npos) << s;

  TaskGraph twice = good;  // A sample processed twice.
  twice.tasks[0].microbatches[1].offset = 0;
  s = ValidateTaskGraph(*m, twice);
  EXPECT_NE(s.message().find("processes sample 0 2 times"), std::string::npos) << s;

  TaskGraph wrong = good;  // A task on a pack that is not its own.
  wrong.tasks[4].vlayers = {0, 4};
  EXPECT_FALSE(ValidateTaskGraph(*m, wrong).ok());

  Config gaps = HandWorkedVpp();
  gaps.backward_packs = {{0, 4}, {5, 12}};
  EXPECT_EQ(BuildTaskGraph(*m, gaps).status().code(), absl::StatusCode::kInvalidArgument);
  Config inverted = HandWorkedVpp();
  inverted.forward_microbatch = 1;
  EXPECT_NE(BuildTaskGraph(*m, inverted).status().message().find("U_f >= U_b"),
            std::string::npos);
}

TEST(TaskGraphTest, DifferentMicrobatchSizesGoThroughTheHost) {
  auto m = Model(12);
  Config c = HandWorkedVpp();
  c.forward_microbatch = 4;  // One forward microbatch, two backward ones.
  absl::StatusOr<TaskGraph> g = BuildTaskGraph(*m, c);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(ValidateTaskGraph(*m, *g).ok()) << ValidateTaskGraph(*m, *g);
  auto to_fused = Of(g->tasks[1], TransferKind::kActivationsOut);
  ASSERT_EQ(to_fused.size(), 1u);
  EXPECT_EQ(to_fused[0].channel, Channel::kHost);
  EXPECT_EQ(Of(g->tasks[2], TransferKind::kActivationsIn).size(), 2u);
}

// Backward packs at microbatches of their own: each backward task splits
// the minibatch at its pack's; gradients between packs of different sizes
// go through the host; sizes outside [U_b, U_f] and a kept pack whose
// size is not U_f are refused.
TEST(TaskGraphTest, BackwardPacksRunAtTheirOwnMicrobatches) {
  auto m = Model(12);
  Config c = HandWorkedVpp();
  c.minibatch = 8;
  c.forward_microbatch = 4;
  c.backward_pack_microbatch = {4, 4, 2};
  absl::StatusOr<TaskGraph> g = BuildTaskGraph(*m, c);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(ValidateTaskGraph(*m, *g).ok()) << ValidateTaskGraph(*m, *g);
  // t2 B[8-11] (fused) at 2, t4 B[4-7] and t6 B[0-3] at 4.
  ASSERT_EQ(g->tasks[2].microbatches.size(), 4u);
  EXPECT_EQ(g->tasks[2].microbatches[0].size, 2);
  ASSERT_EQ(g->tasks[4].microbatches.size(), 2u);
  EXPECT_EQ(g->tasks[4].microbatches[1].offset, 4);
  EXPECT_EQ(Of(g->tasks[2], TransferKind::kActivationsOut).front().channel, Channel::kHost);
  EXPECT_EQ(Of(g->tasks[4], TransferKind::kActivationsOut).front().channel, Channel::kPeer);
  EXPECT_EQ(Of(g->tasks[4], TransferKind::kStashIn).size(), 2u);
  for (const std::vector<int>& bad : std::vector<std::vector<int>>{{8, 4, 2}, {1, 4, 2}, {4, 2}}) {
    c.backward_pack_microbatch = bad;
    EXPECT_FALSE(BuildTaskGraph(*m, c).ok()) << bad[0];
  }
  c.backward_pack_microbatch = {2, 4, 2};
  c.keep = {true, false, false};
  absl::StatusOr<TaskGraph> kept = BuildTaskGraph(*m, c);
  ASSERT_FALSE(kept.ok());
  EXPECT_NE(kept.status().message().find("the pack's U_b 2"), std::string::npos) << kept.status();
}

}  // namespace
}  // namespace harmony::planner

namespace harmony::planner {
namespace {

TEST(TaskGraphTest, OndemandSwapsWeightsForEveryMicrobatch) {
  auto m = Model(4);
  Config c;
  c.schedule = Schedule::kOndemand;
  c.num_devices = 2;
  c.minibatch = 8;  // 4 samples per device, microbatches of 2.
  c.forward_microbatch = 2;
  c.backward_microbatch = 2;
  absl::StatusOr<TaskGraph> g = BuildTaskGraph(*m, c);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(ValidateTaskGraph(*m, *g).ok()) << ValidateTaskGraph(*m, *g);
  uint64_t weights_in = 0;
  int updates = 0;
  for (const Task& t : g->tasks) {
    for (const Transfer& x : t.transfers) {
      if (x.kind == TransferKind::kWeightsIn) weights_in += x.bytes;
      if (x.kind == TransferKind::kActivationsOut) {
        EXPECT_EQ(x.channel, Channel::kLocal);
      }
    }
    updates += t.kind == TaskKind::kUpdate;
    if (t.kind != TaskKind::kUpdate) EXPECT_EQ(t.microbatches.size(), 1u);
  }
  // 4 microbatches in all (2 per device); per microbatch: 3 forward vLayers
  // + 4 backward, 1 MiB each; a device's second microbatch starts on vLayer 0,
  // whose weights its last backward task left on the device.
  EXPECT_EQ(weights_in, (4u * 7 - 2) << 20);
  EXPECT_EQ(updates, 4);
}

}  // namespace
}  // namespace harmony::planner

namespace harmony::planner {
namespace {

TEST(TaskGraphTest, BaselinesSwapPerMicrobatch) {
  auto m = Model(8);
  Config c;
  c.num_devices = 2;
  c.minibatch = 8;
  c.forward_microbatch = 2;
  c.backward_microbatch = 2;
  c.forward_packs = {{0, 4}};
  c.backward_packs = {{0, 4}, {4, 8}};
  // dp-swap: data parallel, packs as given, one microbatch per task.
  c.schedule = Schedule::kDpSwap;
  c.mode = Mode::kVdp;
  absl::StatusOr<TaskGraph> dp = BuildTaskGraph(*m, c);
  ASSERT_TRUE(dp.ok()) << dp.status();
  ASSERT_TRUE(ValidateTaskGraph(*m, *dp).ok()) << ValidateTaskGraph(*m, *dp);
  int tasks = 0;
  for (const Task& t : dp->tasks) tasks += t.kind != TaskKind::kUpdate;
  EXPECT_EQ(tasks, 4 * 3);  // 4 microbatches x (1 forward + 2 backward).
  // gpipe: packs over the devices, activations device to device.
  c.schedule = Schedule::kGpipe;
  c.mode = Mode::kVpp;
  absl::StatusOr<TaskGraph> gp = BuildTaskGraph(*m, c);
  ASSERT_TRUE(gp.ok()) << gp.status();
  ASSERT_TRUE(ValidateTaskGraph(*m, *gp).ok()) << ValidateTaskGraph(*m, *gp);
  bool peer = false;
  uint64_t weights = 0;
  for (const Task& t : gp->tasks) {
    for (const Transfer& x : t.transfers) {
      peer = peer || (x.kind == TransferKind::kActivationsOut && x.channel == Channel::kPeer);
      if (x.kind == TransferKind::kWeightsIn) weights += x.bytes;
    }
  }
  EXPECT_TRUE(peer);
  // Device 0 holds pack 0 (forward and backward), device 1 the fused pack 1:
  // each loads its weights once, then stays on them.
  EXPECT_EQ(weights, 8u << 20);
  c.forward_microbatch = 4;
  EXPECT_EQ(BuildTaskGraph(*m, c).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace harmony::planner
