#include "planner/search/search.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "planner/search/prefetch_choice.h"
#include "planner/search/testing/fake_profile.h"

namespace harmony::planner {
namespace {

using testing::FakeProfileOptions;
using testing::MakeFakeProfile;

SearchOptions Options(int devices, uint64_t memory, int minibatch) {
  SearchOptions o;
  o.num_devices = devices;
  o.device_memory = memory;
  o.minibatch = minibatch;
  return o;
}

TEST(SearchTest, FindsAFittingValidScheduleDeterministically) {
  FakeProfileOptions f;
  f.layers = 16;  // 16 MiB of weights; devices of 6 MiB force swapping.
  auto m = *CostModel::Create(MakeFakeProfile(f));
  SearchOptions o = Options(2, 6u << 20, 16);
  absl::StatusOr<SearchResult> r = SearchSchedule(*m, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->candidates, 10);
  EXPECT_GT(r->feasible, 0);
  EXPECT_TRUE(r->sim.fits);
  for (uint64_t peak : r->sim.device_peak) EXPECT_LE(peak, 6u << 20);
  EXPECT_TRUE(ValidateTaskGraph(*m, r->graph).ok());
  EXPECT_GE(r->graph.config.backward_packs.size(), 3u);
  // Same inputs, same answer.
  absl::StatusOr<SearchResult> again = SearchSchedule(*m, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->graph.config.backward_packs, r->graph.config.backward_packs);
  EXPECT_EQ(again->graph.config.forward_packs, r->graph.config.forward_packs);
  EXPECT_EQ(again->sim.iteration_s, r->sim.iteration_s);
  // Simulating the candidates on several threads changes nothing.
  for (int threads : {1, 3}) {
    SearchOptions p = o;
    p.threads = threads;
    absl::StatusOr<SearchResult> t = SearchSchedule(*m, p);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->graph.config.backward_packs, r->graph.config.backward_packs);
    EXPECT_EQ(t->graph.config.forward_packs, r->graph.config.forward_packs);
    EXPECT_EQ(t->graph.config.forward_microbatch, r->graph.config.forward_microbatch);
    EXPECT_EQ(t->sim.iteration_s, r->sim.iteration_s);
    EXPECT_EQ(t->candidates, r->candidates);
  }
}

TEST(SearchTest, PinnedChoicesAreKept) {
  FakeProfileOptions f;
  f.layers = 8;
  auto m = *CostModel::Create(MakeFakeProfile(f));
  SearchOptions o = Options(2, 64u << 20, 8);
  o.mode = Mode::kVdp;
  o.microbatch = 2;
  o.backward_packs = {{0, 2}, {2, 5}, {5, 8}};
  absl::StatusOr<SearchResult> r = SearchSchedule(*m, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph.config.mode, Mode::kVdp);
  EXPECT_EQ(r->graph.config.forward_microbatch, 2);
  EXPECT_EQ(r->graph.config.backward_microbatch, 2);
  EXPECT_EQ(r->graph.config.backward_packs, o.backward_packs);
}

TEST(SearchTest, BatchStatisticsForceEqualMicrobatches) {
  FakeProfileOptions f;
  f.layers = 8;
  proto::ProfileFile file = MakeFakeProfile(f);
  file.mutable_model()->set_has_batch_statistics(true);
  auto m = *CostModel::Create(file);
  absl::StatusOr<SearchResult> r = SearchSchedule(*m, Options(1, 5u << 20, 16));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph.config.forward_microbatch, r->graph.config.backward_microbatch);
}

TEST(SearchTest, ErrorsSayWhatToChange) {
  FakeProfileOptions f;
  auto m = *CostModel::Create(MakeFakeProfile(f));
  // A vLayer needs 2 MiB + activations for its backward.
  absl::StatusOr<SearchResult> r = SearchSchedule(*m, Options(1, 1u << 20, 4));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("vLayer 0 alone needs"), std::string::npos)
      << r.status();

  SearchOptions vdp = Options(4, 1u << 30, 2);
  vdp.mode = Mode::kVdp;
  r = SearchSchedule(*m, vdp);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("4 devices need a minibatch of at least 4"),
            std::string::npos);
  EXPECT_EQ(SearchSchedule(*m, Options(1, 1u << 30, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace harmony::planner

namespace harmony::planner {
namespace {

// GPipe gets one stage per device even when the last vLayer takes nearly
// all the time (the time split used to leave the last stage empty).
TEST(SearchTest, GpipeStagesAreNeverEmpty) {
  FakeProfileOptions f;
  f.layers = 6;
  proto::ProfileFile p = MakeFakeProfile(f);
  for (proto::MicrobatchProfile& row :
       *p.mutable_profile()->mutable_vlayers(5)->mutable_by_microbatch()) {
    row.set_forward_time_s(row.forward_time_s() * 1000);
    row.set_backward_time_s(row.backward_time_s() * 1000);
  }
  auto m = *CostModel::Create(p);
  SearchOptions o = Options(2, 1u << 30, 8);
  o.schedule = Schedule::kGpipe;
  absl::StatusOr<SearchResult> r = PlanBaseline(*m, o, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  const Packing& packs = r->graph.config.backward_packs;
  ASSERT_EQ(packs.size(), 2u);
  EXPECT_EQ(packs[0].begin, 0);
  EXPECT_EQ(packs[0].end, 5);
  EXPECT_EQ(packs[1].begin, 5);
  EXPECT_EQ(packs[1].end, 6);
  EXPECT_TRUE(ValidateTaskGraph(*m, r->graph).ok());
}

TEST(SearchTest, BaselinesArePlannedAndSwapMoreThanHarmony) {
  FakeProfileOptions f;
  f.layers = 16;
  // A link slow enough that bytes decide (at 1 GB/s the per-microbatch
  // baselines' overlap wins on this profile, and Harmony takes one of them).
  f.bandwidth = 1e8;
  auto m = *CostModel::Create(MakeFakeProfile(f));
  SearchOptions o = Options(2, 6u << 20, 32);
  absl::StatusOr<SearchResult> harmony = SearchSchedule(*m, o);
  ASSERT_TRUE(harmony.ok()) << harmony.status();
  ASSERT_EQ(harmony->graph.config.schedule, Schedule::kHarmony);
  const int u = harmony->graph.config.backward_microbatch;
  for (Schedule s : {Schedule::kOndemand, Schedule::kDpSwap, Schedule::kGpipe}) {
    o.schedule = s;
    absl::StatusOr<SearchResult> b = PlanBaseline(*m, o, u);
    ASSERT_TRUE(b.ok()) << ScheduleName(s) << ": " << b.status();
    EXPECT_TRUE(ValidateTaskGraph(*m, b->graph).ok()) << ScheduleName(s);
    EXPECT_EQ(b->graph.config.schedule, s);
    EXPECT_GT(b->sim.swap.host_link(), harmony->sim.swap.host_link()) << ScheduleName(s);
  }
}

// Where a device cannot hold the next pack's weights beside every task,
// the weights of some packs are not prefetched: those tasks swap their own
// in when they start, the others are prefetched. Forward packs of three
// and two vLayers cannot be on the device together; one-vLayer backward
// packs prefetch in the room of the gradients the task before sent out.
// The choice per pack (from single-buffered) keeps the second forward pack
// late and prefetches the rest: it fits where prefetching everything does
// not, and is faster than single-buffered.
TEST(SearchTest, LateWeightsWhereDoubleBufferingDoesNotFit) {
  FakeProfileOptions f;
  f.layers = 6;
  auto m = *CostModel::Create(MakeFakeProfile(f));
  Config c;
  c.mode = Mode::kVdp;
  c.num_devices = 1;
  c.minibatch = 8;
  c.forward_microbatch = c.backward_microbatch = 4;
  c.forward_packs = {{0, 3}, {3, 5}};
  c.backward_packs = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}};
  c.prefetch = false;
  auto simulate = [&](const Config& x) {
    absl::StatusOr<TaskGraph> g = BuildTaskGraph(*m, x);
    EXPECT_TRUE(g.ok()) << g.status();
    absl::StatusOr<SimResult> sim = Simulate(*m, *g);
    EXPECT_TRUE(sim.ok()) << sim.status();
    return *sim;
  };
  // The smallest memory single-buffered fits.
  SimResult single;
  for (c.device_memory = 1u << 20; c.device_memory < (16u << 20); c.device_memory += 64u << 10) {
    single = simulate(c);
    if (single.fits) break;
  }
  ASSERT_TRUE(single.fits);
  Config all = c;
  all.prefetch = true;
  EXPECT_FALSE(simulate(all).fits) << "at " << c.device_memory << " bytes";
  int simulated = 0;
  std::optional<Candidate> chosen =
      ChoosePrefetchedPacks(*m, c, single.iteration_s, 2, &simulated);
  ASSERT_TRUE(chosen.has_value());
  EXPECT_GT(simulated, 0);
  ASSERT_TRUE(chosen->fits());
  const Config& x = chosen->config;
  EXPECT_TRUE(x.prefetch);
  EXPECT_FALSE(x.Prefetches(TaskKind::kForward, 1));
  for (size_t q = 0; q + 1 < c.backward_packs.size(); ++q) {
    EXPECT_TRUE(x.Prefetches(TaskKind::kBackward, static_cast<int>(q))) << "backward pack " << q;
  }
  EXPECT_LT(chosen->sim->iteration_s, single.iteration_s * (1 - 1e-3));
  // In the task graph: the second forward task swaps its weights in itself;
  // the first backward task's come during it.
  // (A candidate keeps its config; its graph is built again from it.)
  absl::StatusOr<TaskGraph> built = BuildTaskGraph(*m, x);
  ASSERT_TRUE(built.ok()) << built.status();
  const TaskGraph& g = *built;
  EXPECT_TRUE(chosen->graph.ok() && chosen->graph->tasks.empty());
  const std::vector<int> list = g.DeviceTasks(0);
  ASSERT_GE(list.size(), 3u);
  for (const Transfer& t : g.tasks[list[0]].transfers) {
    EXPECT_NE(t.kind, TransferKind::kPrefetchWeights);
  }
  bool prefetches_next = false;
  for (const Transfer& t : g.tasks[list[1]].transfers) {
    prefetches_next = prefetches_next ||
                      (t.kind == TransferKind::kPrefetchWeights && t.peer_task == list[2]);
  }
  EXPECT_TRUE(prefetches_next);
  EXPECT_TRUE(ValidateTaskGraph(*m, g).ok());
}

// Where a vLayer's backward fits only with its gradients summed on the
// host (an embedding table's dense gradient beside the accumulated one),
// the search plans vPP with those packs summed on the host.
TEST(SearchTest, HostSumsPlanWhereDeviceSumsCannot) {
  FakeProfileOptions f;
  f.layers = 4;
  f.dense_fresh_gradients = true;
  auto m = *CostModel::Create(MakeFakeProfile(f));
  // 3 MiB per vLayer's backward summed on the device; 2 MiB on the host.
  // At microbatch 2 (one microbatch of 8 would accumulate nothing).
  const uint64_t memory = (5u << 19) + (64u << 10);
  SearchOptions o = Options(2, memory, 8);
  o.microbatch = 2;
  absl::StatusOr<SearchResult> r = SearchSchedule(*m, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->sim.fits);
  EXPECT_EQ(r->graph.config.mode, Mode::kVpp);
  ASSERT_EQ(r->graph.config.host_sums.size(), r->graph.config.backward_packs.size());
  EXPECT_NE(std::find(r->graph.config.host_sums.begin(), r->graph.config.host_sums.end(), true),
            r->graph.config.host_sums.end());
  EXPECT_TRUE(ValidateTaskGraph(*m, r->graph).ok());
  // Plenty of memory: nothing is summed on the host.
  o.device_memory = 64u << 20;
  absl::StatusOr<SearchResult> roomy = SearchSchedule(*m, o);
  ASSERT_TRUE(roomy.ok()) << roomy.status();
  EXPECT_TRUE(roomy->graph.config.host_sums.empty());
}

// vDP is searched with the activations between a device's packs kept on it
// and sent through the host; pinned, only that kind is planned. Where the
// activations are large and the link slow, keeping them wins.
TEST(SearchTest, LocalActivationsAreSearchedInVdp) {
  FakeProfileOptions f;
  f.layers = 8;
  f.activation_bytes = 64 << 10;
  f.bandwidth = 1e8;
  auto m = *CostModel::Create(MakeFakeProfile(f));
  SearchOptions o = Options(2, 6u << 20, 16);
  o.mode = Mode::kVdp;
  auto count = [](const TaskGraph& g, Channel channel) {
    int n = 0;
    for (const Task& t : g.tasks) {
      for (const Transfer& x : t.transfers) {
        n += x.kind == TransferKind::kActivationsOut && x.channel == channel;
      }
    }
    return n;
  };
  std::map<bool, SearchResult> pinned;
  for (bool local : {false, true}) {
    SearchOptions p = o;
    p.local_activations = local;
    absl::StatusOr<SearchResult> r = SearchSchedule(*m, p);
    ASSERT_TRUE(r.ok()) << r.status();
    // Through the host, on-demand swapping at a larger microbatch can be
    // the fastest plan (the search's candidates include the baselines).
    if (local) {
      ASSERT_EQ(r->graph.config.schedule, Schedule::kHarmony);
    }
    EXPECT_EQ(r->graph.config.local_activations, local);
    if (r->graph.config.schedule == Schedule::kHarmony) {
      EXPECT_EQ(count(r->graph, Channel::kLocal) > 0, local);
    }
    pinned[local] = *std::move(r);
  }
  EXPECT_LT(pinned[true].sim.swap.host_link(), pinned[false].sim.swap.host_link());
  EXPECT_LT(pinned[true].sim.iteration_s, pinned[false].sim.iteration_s);
  absl::StatusOr<SearchResult> both = SearchSchedule(*m, o);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_TRUE(both->graph.config.local_activations);
  EXPECT_GT(both->candidates, pinned[true].candidates);
  EXPECT_LE(both->sim.iteration_s, pinned[true].sim.iteration_s);
}

// At a large minibatch a device cannot hold every microbatch's activations
// between its packs; the search runs the minibatch in waves (passes over
// the packs, each on a slice of it), keeping one wave's on the device, and
// beats the one-pass plan, which sends them through the slow link.
TEST(SearchTest, WavesKeepActivationsOnTheDevicesAtLargeMinibatches) {
  FakeProfileOptions f;
  f.layers = 8;
  f.activation_bytes = 64 << 10;
  f.bandwidth = 1e8;
  auto m = *CostModel::Create(MakeFakeProfile(f));
  SearchOptions o = Options(2, 6u << 20, 256);
  o.mode = Mode::kVdp;
  SearchOptions one = o;
  one.waves = 1;
  absl::StatusOr<SearchResult> single = SearchSchedule(*m, one);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->graph.config.waves, 1);
  absl::StatusOr<SearchResult> r = SearchSchedule(*m, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->graph.config.schedule, Schedule::kHarmony);
  EXPECT_GT(r->graph.config.waves, 1);
  EXPECT_TRUE(r->graph.config.local_activations);
  EXPECT_TRUE(r->sim.fits);
  EXPECT_LT(r->sim.iteration_s, single->sim.iteration_s);
  EXPECT_LT(r->sim.swap.host_link(), single->sim.swap.host_link());
  // Pinned, it is what is planned: the same plan.
  SearchOptions pinned = o;
  pinned.waves = r->graph.config.waves;
  absl::StatusOr<SearchResult> again = SearchSchedule(*m, pinned);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->graph.config.waves, r->graph.config.waves);
  EXPECT_EQ(again->sim.iteration_s, r->sim.iteration_s);
}

// Keep or recompute is chosen per pack: where a vLayer's forward is costly
// and what it saves is small, keeping saves its recompute; where it saves
// much for a cheap forward, keeping only loads the link. The search keeps
// the first kind and recomputes the second, faster than keeping every pack
// or none.
TEST(SearchTest, KeepIsChosenPerPack) {
  FakeProfileOptions f;
  f.layers = 8;
  f.bandwidth = 1e8;
  proto::ProfileFile p = MakeFakeProfile(f);
  for (int l = 0; l < f.layers; ++l) {
    proto::VLayerProfile* v = p.mutable_profile()->mutable_vlayers(l);
    const bool costly = l < 4;
    for (proto::MicrobatchProfile& r : *v->mutable_by_microbatch()) {
      if (costly) {  // Ten times the compute, the kept bytes small.
        r.set_forward_time_s(r.forward_time_s() * 10);
        r.set_backward_time_s(r.backward_time_s() * 10);
        r.set_kept_bytes(r.size() * (1 << 10));
      } else {  // 20 ms over the link per sample, to save 1 ms.
        r.set_kept_bytes(r.size() * (2 << 20));
      }
    }
  }
  auto m = *CostModel::Create(p);
  ASSERT_TRUE(m->measured_kept());
  SearchOptions o = Options(1, 6u << 20, 8);
  o.microbatch = 1;
  auto plan = [&](KeepActivations keep) {
    SearchOptions k = o;
    k.keep = keep;
    return SearchSchedule(*m, k);
  };
  absl::StatusOr<SearchResult> none = plan(KeepActivations::kNone);
  absl::StatusOr<SearchResult> all = plan(KeepActivations::kAll);
  absl::StatusOr<SearchResult> chosen = plan(KeepActivations::kAuto);
  ASSERT_TRUE(none.ok()) << none.status();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  const Config& c = chosen->graph.config;
  ASSERT_EQ(c.schedule, Schedule::kHarmony);
  int kept = 0, recomputed = 0;
  for (size_t q = 0; q + 1 < c.backward_packs.size(); ++q) {
    const PackRange& r = c.backward_packs[q];
    if (c.Keeps(static_cast<int>(q))) {
      ++kept;
      EXPECT_LE(r.end, 4) << "pack " << q << " (vLayers " << r.begin << "-" << r.end - 1
                          << ") keeps the cheap vLayers' many bytes";
    } else if (r.begin >= 4) {
      ++recomputed;
    } else {
      ADD_FAILURE() << "pack " << q << " (vLayers " << r.begin << "-" << r.end - 1
                    << ") recomputes costly vLayers";
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(recomputed, 0);
  EXPECT_GT(chosen->sim.swap.kept_out, 0u);
  EXPECT_LT(chosen->sim.iteration_s, none->sim.iteration_s);
  EXPECT_LT(chosen->sim.iteration_s, all->sim.iteration_s);
  // Deterministic: the same choice again.
  absl::StatusOr<SearchResult> again = plan(KeepActivations::kAuto);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->graph.config.keep, c.keep);
  EXPECT_EQ(again->sim.iteration_s, chosen->sim.iteration_s);
}

// One heavy last vLayer (a language model's head with its loss) holds U_b
// at 2; the other packs, faster per sample at larger microbatches, run
// their backward at microbatches of their own, and the plan is faster for
// it. Not where the model draws dropout masks.
TEST(SearchTest, BackwardPacksTakeTheLargestMicrobatchTheyFit) {
  FakeProfileOptions f;
  f.layers = 8;
  proto::ProfileFile p = MakeFakeProfile(f);
  p.mutable_profile()->set_max_backward_microbatch(2);
  for (int l = 0; l < f.layers; ++l) {
    for (proto::MicrobatchProfile& r : *p.mutable_profile()->mutable_vlayers(l)
                                            ->mutable_by_microbatch()) {
      const int u = r.size();
      r.set_forward_time_s(1e-3 * (u + 3));  // A fixed cost per call.
      r.set_backward_time_s(2e-3 * (u + 3));
      if (l == f.layers - 1) {
        r.set_backward_peak_bytes((2 + 2 * u) * (1 << 20));
        r.set_backward_fits(u <= 2);
      }
    }
  }
  auto m = *CostModel::Create(p);
  absl::StatusOr<SearchResult> r = SearchSchedule(*m, Options(2, 8u << 20, 16));
  ASSERT_TRUE(r.ok()) << r.status();
  const Config& c = r->graph.config;
  ASSERT_EQ(c.schedule, Schedule::kHarmony);
  EXPECT_EQ(c.backward_microbatch, 2);
  ASSERT_EQ(c.backward_pack_microbatch.size(), c.backward_packs.size());
  EXPECT_EQ(c.backward_pack_microbatch.back(), 2);
  EXPECT_GT(*std::max_element(c.backward_pack_microbatch.begin(),
                              c.backward_pack_microbatch.end()), 2);
  Config equal = c;
  equal.backward_pack_microbatch.clear();
  equal.keep.clear();
  absl::StatusOr<TaskGraph> g = BuildTaskGraph(*m, equal);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<SimResult> sim = Simulate(*m, *g);
  ASSERT_TRUE(sim.ok()) << sim.status();
  EXPECT_LT(r->sim.iteration_s, sim->iteration_s);
  // Dropout: one microbatch size throughout.
  for (int l = 0; l < f.layers; ++l) {
    p.mutable_model()->mutable_decomposition()->mutable_vlayers(l)->set_uses_rng(true);
  }
  absl::StatusOr<SearchResult> masked =
      SearchSchedule(**CostModel::Create(p), Options(2, 8u << 20, 16));
  ASSERT_TRUE(masked.ok()) << masked.status();
  EXPECT_TRUE(masked->graph.config.backward_pack_microbatch.empty());
  EXPECT_EQ(masked->graph.config.forward_microbatch, masked->graph.config.backward_microbatch);
}

// vDP on several devices copies the parameters from device 0 when devices
// copy between them at least as fast as from the host (auto), or as pinned;
// never for vPP or a baseline.
TEST(SearchTest, PeerWeightsFollowTheBandwidthsOrThePin) {
  FakeProfileOptions f;
  f.layers = 8;
  f.bandwidth = 1e8;
  proto::ProfileFile profile = MakeFakeProfile(f);
  auto m = *CostModel::Create(profile);
  SearchOptions o = Options(2, 6u << 20, 16);
  o.mode = Mode::kVdp;
  auto peer_weights = [](const TaskGraph& g) {
    int n = 0;
    for (const Task& t : g.tasks) {
      for (const Transfer& x : t.transfers) {
        n += x.kind == TransferKind::kWeightsIn && x.channel == Channel::kPeer;
      }
    }
    return n;
  };
  absl::StatusOr<SearchResult> on = SearchSchedule(*m, o);  // Peer = host bandwidth.
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->graph.config.peer_weights);
  EXPECT_GT(peer_weights(on->graph), 0);
  SearchOptions pinned = o;
  pinned.peer_weights = false;
  absl::StatusOr<SearchResult> off = SearchSchedule(*m, pinned);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->graph.config.peer_weights);
  EXPECT_EQ(peer_weights(off->graph), 0);
  EXPECT_LT(on->sim.swap.weights_in, off->sim.swap.weights_in);
  EXPECT_LE(on->sim.iteration_s, off->sim.iteration_s);
  // Devices that copy between them slower than from the host: not by default.
  profile.mutable_profile()->mutable_bandwidths()->set_peer_bytes_per_s(1e7);
  auto slow = *CostModel::Create(profile);
  absl::StatusOr<SearchResult> r = SearchSchedule(*slow, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->graph.config.peer_weights);
  // Nor for vPP or the data-parallel baseline, even pinned.
  pinned.peer_weights = true;
  pinned.mode = Mode::kVpp;
  r = SearchSchedule(*m, pinned);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(peer_weights(r->graph), 0);
  pinned.mode = std::nullopt;
  pinned.schedule = Schedule::kDpSwap;
  r = SearchSchedule(*m, pinned);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(peer_weights(r->graph), 0);
}

// The compute bound by hand: 1 ms per sample and vLayer forward, 2 ms
// backward (with the recompute). vDP on 2 devices, minibatch 9: the first
// device's 5 samples through 3 forward and 6 backward vLayers; vPP: the 9
// samples' compute over the 2 devices.
// Within the tolerance, time and bytes trade at par.
TEST(SearchTest, TimeAndBytesTradeAtParWithinTheTolerance) {
  // zoo vgg's case: 0.2% fewer bytes no longer buys a plan 2.7% slower.
  EXPECT_TRUE(BeatsWithinTolerance(0.4917, 1244, 0.5054, 1242));
  EXPECT_FALSE(BeatsWithinTolerance(0.5054, 1242, 0.4917, 1244));
  // 10% fewer bytes for 4% more time wins; 2% fewer for 4% more does not.
  EXPECT_TRUE(BeatsWithinTolerance(1.04, 900, 1.0, 1000));
  EXPECT_FALSE(BeatsWithinTolerance(1.04, 980, 1.0, 1000));
  // Equal products: neither; no bytes at all: time decides.
  EXPECT_FALSE(BeatsWithinTolerance(2.0, 500, 1.0, 1000));
  EXPECT_FALSE(BeatsWithinTolerance(1.0, 1000, 2.0, 500));
  EXPECT_TRUE(BeatsWithinTolerance(1.0, 0, 1.01, 0));
  EXPECT_FALSE(BeatsWithinTolerance(1.01, 0, 1.0, 0));
}

TEST(SearchTest, BusiestDeviceComputeByHand) {
  FakeProfileOptions f;
  f.layers = 6;
  auto m = *CostModel::Create(MakeFakeProfile(f));
  Config c;
  c.mode = Mode::kVdp;
  c.num_devices = 2;
  c.minibatch = 9;
  c.forward_microbatch = 4;
  c.backward_microbatch = 2;
  c.forward_packs = {{0, 3}};
  c.backward_packs = {{0, 3}, {3, 6}};
  EXPECT_NEAR(BusiestDeviceComputeSeconds(*m, c), 5 * 3 * 1e-3 + 5 * 6 * 2e-3, 1e-9);
  c.mode = Mode::kVpp;
  EXPECT_NEAR(BusiestDeviceComputeSeconds(*m, c), (9 * 3 * 1e-3 + 9 * 6 * 2e-3) / 2, 1e-9);
  // Never above what the simulator says the iteration takes.
  for (Mode mode : {Mode::kVdp, Mode::kVpp}) {
    c.mode = mode;
    absl::StatusOr<TaskGraph> g = BuildTaskGraph(*m, c);
    ASSERT_TRUE(g.ok()) << g.status();
    absl::StatusOr<SimResult> sim = Simulate(*m, *g);
    ASSERT_TRUE(sim.ok()) << sim.status();
    EXPECT_LE(BusiestDeviceComputeSeconds(*m, c), sim->iteration_s);
  }
}

// Branch and bound loses nothing: on chains of several sizes, caps and
// device counts, the pruned search returns what the full one does, and
// prunes somewhere.
TEST(SearchTest, PruningGivesTheSameResultAsTheFullSearch) {
  int pruned = 0, pruned_configs = 0;
  for (int layers : {4, 12, 24}) {
    for (double overhead : {0.0, 1e-3}) {
      FakeProfileOptions f;
      f.layers = layers;
      proto::ProfileFile p = MakeFakeProfile(f);
      // A fixed cost per invocation: small microbatches compute slower per
      // sample, as on real devices, which is what the bound prunes.
      for (proto::VLayerProfile& v : *p.mutable_profile()->mutable_vlayers()) {
        for (proto::MicrobatchProfile& row : *v.mutable_by_microbatch()) {
          row.set_forward_time_s(row.forward_time_s() + overhead);
          row.set_backward_time_s(row.backward_time_s() + 2 * overhead);
        }
      }
      auto m = *CostModel::Create(p);
      for (int devices : {1, 2, 4}) {
        for (uint64_t memory : {4u << 20, 16u << 20}) {
          SearchOptions o = Options(devices, memory, 32);
          absl::StatusOr<SearchResult> fast = SearchSchedule(*m, o);
          o.prune = false;
          absl::StatusOr<SearchResult> full = SearchSchedule(*m, o);
          const std::string where = absl::StrCat(layers, " vLayers, ", devices, " x ", memory);
          ASSERT_EQ(fast.ok(), full.ok()) << where;
          if (!fast.ok()) continue;
          EXPECT_EQ(fast->sim.iteration_s, full->sim.iteration_s) << where;
          EXPECT_EQ(fast->sim.swap.host_link(), full->sim.swap.host_link()) << where;
          EXPECT_EQ(fast->graph.config.backward_packs, full->graph.config.backward_packs) << where;
          EXPECT_EQ(fast->graph.config.backward_microbatch, full->graph.config.backward_microbatch)
              << where;
          EXPECT_EQ(fast->graph.config.local_activations, full->graph.config.local_activations)
              << where;
          EXPECT_EQ(full->pruned, 0);
          EXPECT_EQ(full->pruned_configs, 0);
          EXPECT_LE(fast->candidates, full->candidates);
          pruned += fast->pruned;
          pruned_configs += fast->pruned_configs;
        }
      }
    }
  }
  EXPECT_GT(pruned, 0);
  EXPECT_GT(pruned_configs, 0);
}

// any_fit (SmallestDeviceMemory's question): a plan exactly where the full
// search finds one, whole and within the devices, after fewer simulations.
TEST(SearchTest, AnyFitPlansExactlyWhereTheFullSearchDoes) {
  int fitting = 0, failing = 0, fewer = 0;
  for (int layers : {4, 12}) {
    FakeProfileOptions f;
    f.layers = layers;
    auto m = *CostModel::Create(MakeFakeProfile(f));
    for (int devices : {1, 2, 4}) {
      for (uint64_t memory : {1u << 19, 1u << 20, 2u << 20, 4u << 20, 16u << 20}) {
        SearchOptions o = Options(devices, memory, 32);
        absl::StatusOr<SearchResult> full = SearchSchedule(*m, o);
        o.any_fit = true;
        absl::StatusOr<SearchResult> any = SearchSchedule(*m, o);
        const std::string where = absl::StrCat(layers, " vLayers, ", devices, " x ", memory);
        ASSERT_EQ(any.ok(), full.ok()) << where << ": " << any.status() << " / " << full.status();
        if (!any.ok()) {
          EXPECT_TRUE(absl::IsResourceExhausted(any.status())) << where;
          ++failing;
          continue;
        }
        ++fitting;
        EXPECT_TRUE(any->sim.fits) << where;
        EXPECT_FALSE(any->graph.tasks.empty()) << where;
        EXPECT_TRUE(ValidateTaskGraph(*m, any->graph).ok()) << where;
        EXPECT_LE(any->candidates, full->candidates) << where;
        if (any->candidates < full->candidates) ++fewer;
      }
    }
  }
  EXPECT_GT(fitting, 0);
  EXPECT_GT(failing, 0);
  EXPECT_GT(fewer, fitting / 2);
}

}  // namespace
}  // namespace harmony::planner
