#include "planner/search/cost_model.h"

#include "gtest/gtest.h"
#include "planner/search/testing/fake_profile.h"

namespace harmony::planner {
namespace {

using testing::FakeProfileOptions;
using testing::MakeFakeProfile;

TEST(CostModelTest, InterpolatesBetweenProfiledSizes) {
  FakeProfileOptions o;
  auto model = CostModel::Create(MakeFakeProfile(o));
  ASSERT_TRUE(model.ok()) << model.status();
  const CostModel& m = **model;
  EXPECT_EQ(m.num_layers(), 4);
  // Profiled at 4 and 8; 6 lies halfway.
  LayerCost c = m.Cost(1, 6);
  EXPECT_DOUBLE_EQ(c.forward_s, 6e-3);
  EXPECT_DOUBLE_EQ(c.backward_s, 12e-3);
  EXPECT_EQ(c.forward_peak, (1u << 20) + 3 * 1024 * 6);
  EXPECT_EQ(c.input_bytes, 6 * 1024u);
  EXPECT_TRUE(c.forward_fits && c.backward_fits);
  // Past the largest profiled size: proportional, and not known to fit.
  LayerCost big = m.Cost(1, 128);
  EXPECT_DOUBLE_EQ(big.forward_s, 128e-3);
  EXPECT_FALSE(big.backward_fits);
}

// On several devices the planner's times are each vLayer's alone, slowed
// by its median over the sizes of (beside the others ÷ alone): a size whose
// timing beside the others caught the machine slow does not stand apart.
TEST(CostModelTest, BusyTimesAreTheMedianSlowdownOfEachVLayer) {
  FakeProfileOptions o;
  o.max_microbatch = 8;  // Sizes 1, 2, 4 and 8.
  proto::ProfileFile p = MakeFakeProfile(o);
  p.mutable_profile()->set_num_devices(2);
  for (proto::VLayerProfile& v : *p.mutable_profile()->mutable_vlayers()) {
    for (proto::MicrobatchProfile& r : *v.mutable_by_microbatch()) {
      const double slow = r.size() == 4 ? 1.3 : r.size() == 8 ? 1.12 : 1.1;
      r.set_forward_time_busy_s(r.forward_time_s() * slow);
      r.set_backward_time_busy_s(r.backward_time_s() * (r.size() == 2 ? 0.9 : 1.05));
    }
  }
  auto m = *CostModel::Create(p);
  const LayerCost c4 = m->Cost(1, 4);
  EXPECT_DOUBLE_EQ(c4.forward_s, 4e-3 * 1.1);  // Not 1.3: the median of 1.1, 1.1, 1.3, 1.12.
  EXPECT_DOUBLE_EQ(c4.backward_s, 8e-3 * 1.05);
  EXPECT_DOUBLE_EQ(m->Cost(1, 2).backward_s, 4e-3 * 1.05);
  // One device: the times alone.
  p.mutable_profile()->set_num_devices(1);
  EXPECT_DOUBLE_EQ((*CostModel::Create(p))->Cost(1, 4).forward_s, 4e-3);
}

TEST(CostModelTest, PackSums) {
  FakeProfileOptions o;
  auto m = *CostModel::Create(MakeFakeProfile(o));
  EXPECT_EQ(m->WeightBytes(0, 3), 3u << 20);
  EXPECT_DOUBLE_EQ(m->ForwardSeconds(1, 3, 2), 4e-3);
  EXPECT_DOUBLE_EQ(m->BackwardSeconds(0, 4, 1), 8e-3);
  EXPECT_DOUBLE_EQ(m->UpdateSeconds(0, 4), 4e-3);
  // Forward: weights of the pack + the largest transient (3 activations).
  EXPECT_EQ(m->ForwardMemory(0, 2, 8), (2u << 20) + 3 * 1024 * 8);
  // Backward: weights + gradients + pack input + saved activations of each
  // vLayer (peak - weights - gradients - input = 3 activations).
  EXPECT_EQ(m->BackwardMemory(0, 2, 8), (4u << 20) + 1024 * 8 + 2 * 3 * 1024 * 8);
}

// A pack runs its first vLayer at its time in turn and the later ones at
// their chained share (the profile's pairs timed as one task); a pack of
// one is its vLayer's own time, and the factors interpolate between sizes.
TEST(CostModelTest, APacksLaterVLayersTakeTheirChainedShare) {
  FakeProfileOptions o;  // Per vLayer: forward 1 ms per sample, backward 2.
  proto::ProfileFile p = MakeFakeProfile(o);
  for (proto::VLayerProfile& v : *p.mutable_profile()->mutable_vlayers()) {
    for (proto::MicrobatchProfile& r : *v.mutable_by_microbatch()) {
      r.set_forward_chained(0.8);
      r.set_backward_chained(r.size() == 1 ? 0.5 : 0.7);
    }
  }
  auto m = *CostModel::Create(p);
  EXPECT_DOUBLE_EQ(m->ForwardSeconds(1, 2, 2), 2e-3);
  EXPECT_DOUBLE_EQ(m->ForwardSeconds(1, 3, 2), 2e-3 + 0.8 * 2e-3);
  EXPECT_DOUBLE_EQ(m->ForwardSeconds(1, 3, 2, /*alone=*/true), 2e-3 + 0.8 * 2e-3);
  EXPECT_DOUBLE_EQ(m->BackwardSeconds(0, 4, 1), 2e-3 + 3 * 0.5 * 2e-3);
  EXPECT_DOUBLE_EQ(m->BackwardSeconds(0, 4, 2), 4e-3 + 3 * 0.7 * 4e-3);
  EXPECT_DOUBLE_EQ(m->BackwardSeconds(2, 2, 2), 0);
  // Size 3 lies halfway between the rows of 2 and 4 (0.7 both).
  EXPECT_DOUBLE_EQ(m->Cost(0, 3).backward_chained, 0.7);
  // The least a vLayer's backward adds to a pack.
  EXPECT_DOUBLE_EQ(m->LeastBackwardSeconds(3, 1), 0.5 * 2e-3);
  // Past the cached sizes the same rule, extrapolated from the largest row.
  EXPECT_DOUBLE_EQ(m->ForwardSeconds(0, 3, 300), 0.3 + 2 * 0.8 * 0.3);
  // Two packs cost more than one of the same vLayers: the second's first
  // vLayer runs at its full time.
  EXPECT_GT(m->ForwardSeconds(0, 2, 8) + m->ForwardSeconds(2, 4, 8), m->ForwardSeconds(0, 4, 8));
}


// the backward of the last one adds its transient (its peak above weights,
// input and saved bytes, fresh gradients included: from the second
// microbatch on they exist beside the accumulated ones).
TEST(CostModelTest, BackwardMemoryFromSavedActivations) {
  FakeProfileOptions o;
  proto::ProfileFile file = MakeFakeProfile(o);
  for (auto& v : *file.mutable_profile()->mutable_vlayers()) {
    for (auto& row : *v.mutable_by_microbatch()) {
      row.set_saved_bytes(2 * o.activation_bytes * row.size());  // Peak: 2P + 4a.
    }
  }
  auto m = *CostModel::Create(file);
  const uint64_t p = o.parameter_bytes, a = o.activation_bytes * 8;
  EXPECT_EQ(m->Cost(1, 8).saved_bytes, 2 * a);
  // Weights and gradients 4P, input a, saved 2a + 2a, transient P + a.
  EXPECT_EQ(m->BackwardMemory(0, 2, 8), 4 * p + a + 4 * a + p + a);
  // One vLayer: 2P + a + 2a + (P + a).
  EXPECT_EQ(m->BackwardMemory(2, 3, 8), 2 * p + a + 2 * a + p + a);
  // Interpolated like the peaks: halfway between 4 and 8.
  EXPECT_EQ(m->Cost(1, 6).saved_bytes, 2 * o.activation_bytes * 6);
}

// Profiles with backward_first_peak_bytes measure the backward with the gradients allocated
// (its peak holds them all) and apart from that a task's first microbatch.
// The simulator's working sets leave out what it holds on its own.
TEST(CostModelTest, WorkingSetsBesideWhatTheSimulatorHolds) {
  FakeProfileOptions o;
  proto::ProfileFile file = MakeFakeProfile(o);
  file.mutable_profile()->set_backward_peak_with_gradients(true);
  for (auto& v : *file.mutable_profile()->mutable_vlayers()) {
    for (auto& row : *v.mutable_by_microbatch()) {
      row.set_saved_bytes(2 * o.activation_bytes * row.size());  // Peak: 2P + 4a.
      // Fresh gradients: half of them at the peak.
      row.set_backward_first_peak_bytes(row.backward_peak_bytes() - o.parameter_bytes / 2);
    }
  }
  auto m = *CostModel::Create(file);
  const uint64_t p = o.parameter_bytes, a = o.activation_bytes * 8;
  EXPECT_TRUE(m->first_working_has_gradients());
  // Transient beyond weights, gradients, input and saved: a (not P + a).
  EXPECT_EQ(m->BackwardMemory(2, 3, 8), 2 * p + a + 2 * a + a);
  // Less the gradients arriving from vLayer 3 (its output, a): the saved 2a.
  EXPECT_EQ(m->BackwardWorkingBytes(2, 3, 8, false), 2 * a);
  // First microbatch, highest at vLayer 1: its saved 2a, its peak's P/2 + a
  // above weights, input and saved (half its gradients), and vLayer 2's
  // gradients (P), made by then.
  EXPECT_EQ(m->BackwardWorkingBytes(1, 3, 8, true), 2 * a + p / 2 + a + p);
  // Forward: the pack's input (a) is held apart; vLayer 2 reads vLayer 1's
  // output inside the pack, in its peak.
  EXPECT_EQ(m->ForwardWorkingBytes(1, 2, 8), 2 * a);
  EXPECT_EQ(m->ForwardWorkingBytes(1, 3, 8), 3 * a);
}

// A loss applied outside the model reads the targets on the device of the
// last pack: they are moved there (the task graph's data in); their memory
// is in the last vLayer's measured backward peak already.
TEST(CostModelTest, TargetsOfALossOutsideTheModel) {
  FakeProfileOptions o;
  proto::ProfileFile file = MakeFakeProfile(o);
  proto::TensorMeta* t = file.mutable_model()->add_sample_targets();
  t->add_shape(16);
  t->set_dtype(proto::INT64);
  t->set_batched(true);
  t->set_bytes(16 * 8);
  const auto plain = *CostModel::Create(MakeFakeProfile(o));
  file.mutable_model()->set_loss(proto::CROSS_ENTROPY);
  const auto with_targets = *CostModel::Create(file);
  EXPECT_EQ(plain->TargetBytes(4), 0u);
  EXPECT_EQ(with_targets->TargetBytes(4), 32u);
  EXPECT_EQ(with_targets->BackwardMemory(2, 4, 8), plain->BackwardMemory(2, 4, 8));
  // When forward takes the targets and returns the loss, they are data.
  file.mutable_model()->set_loss(proto::LOSS_FROM_MODEL);
  EXPECT_EQ((*CostModel::Create(file))->TargetBytes(4), 0u);
}

TEST(CostModelTest, SkipConnectionsReachTheirConsumer) {
  FakeProfileOptions o;
  o.layers = 5;
  o.skip_from = 0;  // vLayer 0's output is read by vLayers 1 and 4.
  auto m = *CostModel::Create(MakeFakeProfile(o));
  // Pack [2, 5) gets vLayer 1's output and vLayer 0's (for vLayer 4).
  EXPECT_EQ(m->PackInputBytes(2, 5, 4), 2 * 1024u * 4);
  // Pack [0, 2) sends vLayer 1's output on, and vLayer 0's to vLayer 4.
  EXPECT_EQ(m->PackOutputBytes(0, 2, 4), 2 * 1024u * 4);
  EXPECT_EQ(m->PackOutputBytes(0, 1, 4), 1024u * 4);  // Read by 1 and 4: once.
}

// A DenseNet-like reader: vLayer 21 of 24 reads every earlier vLayer's
// output, each twice. Each counts once, past the inline few (Seen).
TEST(CostModelTest, ManyReadsOfTheSameOutputsCountOnce) {
  FakeProfileOptions o;
  o.layers = 24;
  proto::ProfileFile file = MakeFakeProfile(o);
  const int reader = 21;
  proto::VLayer* v = file.mutable_model()->mutable_decomposition()->mutable_vlayers(reader);
  proto::VLayerProfile* vp = file.mutable_profile()->mutable_vlayers(reader);
  for (int twice = 0; twice < 2; ++twice) {
    for (int producer = 0; producer < reader; ++producer) {
      proto::TensorRef* in = v->add_inputs();
      in->set_producer(producer);
      in->set_index(0);
      for (proto::MicrobatchProfile& m : *vp->mutable_by_microbatch()) {
        *m.add_inputs() = m.inputs(0);
      }
    }
  }
  auto m = *CostModel::Create(file);
  const uint64_t one = 1024u * 4;  // One vLayer's output at microbatch 4.
  EXPECT_EQ(m->CrossBytes(0, reader, reader, reader + 1, 4), reader * one);
  EXPECT_EQ(m->PackInputBytes(reader, 24, 4), reader * one);
  EXPECT_EQ(m->PackOutputBytes(0, reader, 4), reader * one);
  // A few of them: inline.
  EXPECT_EQ(m->CrossBytes(0, 3, reader, reader + 1, 4), 3 * one);
}

// The step hand-off of the sizes that measured it (the largest over the
// vLayers of a size), interpolated between them and the nearest beyond;
// none measured: 0.
TEST(CostModelTest, StepHandoffFollowsTheMeasuredSizes) {
  FakeProfileOptions o;
  o.max_microbatch = 16;  // Sizes 1, 2, 4, 8 and 16.
  proto::ProfileFile p = MakeFakeProfile(o);
  EXPECT_EQ((*CostModel::Create(p))->StepHandoffSeconds(4), 0);
  for (proto::VLayerProfile& v : *p.mutable_profile()->mutable_vlayers()) {
    for (proto::MicrobatchProfile& r : *v.mutable_by_microbatch()) {
      if (r.size() == 2) r.set_step_handoff_s(v.vlayer() == 1 ? 1e-4 : 0.5e-4);
      if (r.size() == 8) r.set_step_handoff_s(3e-4);
    }
  }
  auto m = *CostModel::Create(p);
  EXPECT_DOUBLE_EQ(m->StepHandoffSeconds(1), 1e-4);
  EXPECT_DOUBLE_EQ(m->StepHandoffSeconds(2), 1e-4);
  EXPECT_DOUBLE_EQ(m->StepHandoffSeconds(5), 2e-4);
  EXPECT_DOUBLE_EQ(m->StepHandoffSeconds(8), 3e-4);
  EXPECT_DOUBLE_EQ(m->StepHandoffSeconds(64), 3e-4);
}

TEST(CostModelTest, RejectsBrokenProfiles) {
  proto::ProfileFile empty;
  EXPECT_EQ(CostModel::Create(empty).status().code(),
            absl::StatusCode::kInvalidArgument);
  proto::ProfileFile no_bw = MakeFakeProfile(FakeProfileOptions{});
  no_bw.mutable_profile()->clear_bandwidths();
  EXPECT_EQ(CostModel::Create(no_bw).status().code(),
            absl::StatusCode::kInvalidArgument);
  proto::ProfileFile unordered = MakeFakeProfile(FakeProfileOptions{});
  unordered.mutable_profile()->mutable_vlayers(0)->mutable_by_microbatch(1)->set_size(1);
  EXPECT_EQ(CostModel::Create(unordered).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace harmony::planner
