#include "planner/profile/target.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "common/tensor_file.h"
#include "gtest/gtest.h"
#include "planner/profile/profiler.h"
#include "zoo/zoo.h"

namespace harmony::planner {
namespace {

std::string Tmp(const std::string& name) { return ::testing::TempDir() + "/" + name; }

common::TrainingData WriteResnet(const std::string& path) {
  zoo::ZooOptions o;
  o.family = "resnet";
  o.depth = 1;
  o.width = 16;
  o.image_size = 8;
  o.samples = 4;
  EXPECT_TRUE(zoo::WriteZooModelAndData(o, path, path + ".data").ok());
  return *common::LoadTrainingData(path + ".data");
}

// A target as a GPU partition behaves: the allocations themselves are never
// refused (the CPU devices under it are uncapped), the cap is checked on
// the peak afterwards. Counts what the profiler asks of it.
class PartitionLikeTarget : public Target {
 public:
  explicit PartitionLikeTarget(uint64_t cap)
      : cap_(cap), cpu_(CreateCpuTarget({common::DeviceSpec::Kind::kCpu, 2, 1ull << 40})) {}

  class CappedMeter : public Meter {
   public:
    CappedMeter(PartitionLikeTarget* t, std::unique_ptr<Meter> inner, uint64_t cap)
        : t_(t), inner_(std::move(inner)), cap_(cap) {}
    uint64_t capacity() const override { return cap_; }
    uint64_t used() const override { return inner_->used(); }
    uint64_t peak() const override { return inner_->peak(); }
    void ResetPeak() override { inner_->ResetPeak(); }
    absl::Status CheckPeak(const std::string& activity) const override {
      ++t_->checks;
      if (inner_->peak() <= cap_) return absl::OkStatus();
      return absl::ResourceExhaustedError(activity + " over the partition");
    }
    std::unique_ptr<Scope> Enter(int lane, Role role, std::string activity) override {
      {
        std::lock_guard<std::mutex> lock(t_->mu);
        t_->entered.insert({lane, static_cast<int>(role)});
      }
      return inner_->Enter(lane, role, std::move(activity));
    }

   private:
    PartitionLikeTarget* const t_;
    const std::unique_ptr<Meter> inner_;
    const uint64_t cap_;
  };

  std::string kind() const override { return "partition-like"; }
  std::string name() const override { return "a fake partition"; }
  int count() const override { return 2; }
  uint64_t capacity() const override { return cap_; }
  std::unique_ptr<Meter> NewMeter(uint64_t capacity) override {
    return std::make_unique<CappedMeter>(this, cpu_->NewMeter(1ull << 40), capacity);
  }
  at::Tensor ToDevice(const at::Tensor& t) override {
    ++to_device;
    return cpu_->ToDevice(t);
  }
  at::Tensor ToHost(const at::Tensor& t) override {
    ++to_host;
    return cpu_->ToHost(t);
  }
  void Synchronize() override { ++syncs; }
  absl::StatusOr<proto::Bandwidths> MeasureBandwidths(int repeats) override {
    proto::Bandwidths bw;
    bw.set_host_to_device_bytes_per_s(1e9);
    bw.set_both_directions_bytes_per_s(0.9e9);
    return bw;
  }

  std::atomic<int> to_device{0}, to_host{0}, syncs{0}, checks{0};
  std::mutex mu;
  std::set<std::pair<int, int>> entered;  // (lane, role); guarded by mu.

 private:
  const uint64_t cap_;
  std::unique_ptr<Target> cpu_;
};

// A cap checked on the peak after each run (a GPU partition's) finds the
// same largest microbatches as a virtual CPU device's, which refuses the
// allocation that goes over it; the profile is the target's.
TEST(TargetTest, APeakCheckedAfterwardsProbesAsARefusedAllocationDoes) {
  const std::string path = Tmp("resnet.pt");
  common::TrainingData sample = WriteResnet(path);
  constexpr uint64_t kCap = 3ull << 20;
  ProfilerOptions options;
  options.devices = {common::DeviceSpec::Kind::kCpu, 2, kCap};
  options.max_microbatch = 256;
  options.repeats = 1;
  absl::StatusOr<proto::ProfileFile> cpu = ProfileModel(path, sample, options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  PartitionLikeTarget fake(kCap);
  options.target = &fake;
  absl::StatusOr<proto::ProfileFile> partition = ProfileModel(path, sample, options);
  ASSERT_TRUE(partition.ok()) << partition.status();
  const proto::Profile& c = cpu->profile();
  const proto::Profile& p = partition->profile();
  ASSERT_LT(c.max_backward_microbatch(), 256u);  // The cap binds.
  EXPECT_EQ(p.max_backward_microbatch(), c.max_backward_microbatch());
  EXPECT_EQ(p.max_forward_microbatch(), c.max_forward_microbatch());
  ASSERT_EQ(p.vlayers_size(), c.vlayers_size());
  for (int k = 0; k < p.vlayers_size(); ++k) {
    ASSERT_EQ(p.vlayers(k).by_microbatch_size(), c.vlayers(k).by_microbatch_size());
    for (int i = 0; i < p.vlayers(k).by_microbatch_size(); ++i) {
      const proto::MicrobatchProfile& a = p.vlayers(k).by_microbatch(i);
      const proto::MicrobatchProfile& b = c.vlayers(k).by_microbatch(i);
      EXPECT_EQ(a.backward_fits(), b.backward_fits()) << "vLayer " << k << " u " << a.size();
      EXPECT_EQ(a.forward_fits(), b.forward_fits()) << "vLayer " << k << " u " << a.size();
      if (a.backward_fits()) {
        EXPECT_EQ(a.backward_peak_bytes(), b.backward_peak_bytes());
      }
    }
  }
  EXPECT_EQ(p.device_kind(), "partition-like");
  EXPECT_EQ(p.device_name(), "a fake partition");
  EXPECT_EQ(p.device_memory_bytes(), kCap);
  EXPECT_EQ(p.num_devices(), 2u);
  EXPECT_EQ(p.bandwidths().both_directions_bytes_per_s(), 0.9e9);
  EXPECT_NE(ProfileSummary(*partition).find("both directions at once"), std::string::npos);
  // Every run's inputs went through the target, every timed run ended on
  // its Synchronize, every single run had its peak checked; the vLayers
  // in turn ran on lanes 0 and 1 (the plan's other device), copies on
  // their own streams.
  EXPECT_GT(fake.to_device.load(), 0);
  EXPECT_GT(fake.to_host.load(), 0);
  EXPECT_GT(fake.syncs.load(), 0);
  EXPECT_GT(fake.checks.load(), 0);
  using R = Target::Role;
  for (int lane : {0, 1}) {
    for (R role : {R::kCompute, R::kCopyIn, R::kCopyOut}) {
      EXPECT_EQ(fake.entered.count({lane, static_cast<int>(role)}), 1u)
          << "lane " << lane << " role " << static_cast<int>(role);
    }
  }
}

// (Bazel's build has no CUDA; scripts/gpu-check.sh's profiles on the GPU.)
// The lane whose scope the calling thread is in (-1 outside any).
thread_local int tls_lane = -1;

// A partition-like target that knows which lane the calling thread is in.
class LaneTarget : public PartitionLikeTarget {
 public:
  using PartitionLikeTarget::PartitionLikeTarget;

  class LaneScope : public Scope {
   public:
    LaneScope(LaneTarget* t, int lane, Role role, std::unique_ptr<Scope> inner)
        : t_(t), inner_(std::move(inner)), saved_(tls_lane), entered_(lane), role_(role) {
      tls_lane = lane;
      t_->Entered(lane, role, true);
    }
    ~LaneScope() override {
      t_->Entered(entered_, role_, false);
      tls_lane = saved_;
    }

   private:
    LaneTarget* const t_;
    std::unique_ptr<Scope> inner_;
    const int saved_, entered_;
    const Role role_;
  };
  class LaneMeter : public Meter {
   public:
    LaneMeter(LaneTarget* t, std::unique_ptr<Meter> inner) : t_(t), inner_(std::move(inner)) {}
    uint64_t capacity() const override { return inner_->capacity(); }
    uint64_t used() const override { return inner_->used(); }
    uint64_t peak() const override { return inner_->peak(); }
    void ResetPeak() override { inner_->ResetPeak(); }
    absl::Status CheckPeak(const std::string& activity) const override {
      return inner_->CheckPeak(activity);
    }
    std::unique_ptr<Scope> Enter(int lane, Role role, std::string activity) override {
      return std::make_unique<LaneScope>(t_, lane, role,
                                         inner_->Enter(lane, role, std::move(activity)));
    }

   private:
    LaneTarget* const t_;
    const std::unique_ptr<Meter> inner_;
  };

  std::unique_ptr<Meter> NewMeter(uint64_t capacity) override {
    return std::make_unique<LaneMeter>(this, PartitionLikeTarget::NewMeter(capacity));
  }
  // A lane's scope of `role` entered (or left).
  virtual void Entered(int lane, Role role, bool in) {}
};

// A partition-like target whose second device (lane 1, a neighbour while
// the vLayers are timed beside busy devices) fails every copy onto it.
class NeighbourFailsTarget : public LaneTarget {
 public:
  using LaneTarget::LaneTarget;
  at::Tensor ToDevice(const at::Tensor& t) override {
    if (tls_lane == 1) throw std::runtime_error("device 1 lost its memory");
    return PartitionLikeTarget::ToDevice(t);
  }
};

// A partition-like target whose second device takes 4 ms longer over each
// step; counts the steps each lane finishes while lane 1 computes. Of kind
// cpu: no untimed warm-up pass, whose steps are not in step.
class SlowNeighbourTarget : public LaneTarget {
 public:
  using LaneTarget::LaneTarget;
  std::string kind() const override { return "cpu"; }
  void Entered(int lane, Role role, bool in) override {
    if (lane != 1 || role != Role::kCompute) return;
    std::lock_guard<std::mutex> lock(mu);
    neighbour_computing = in;
    done[0] = done[1] = 0;
  }
  void Synchronize() override {  // A step's end, on its compute thread.
    const int lane = tls_lane;
    if (lane == 1) std::this_thread::sleep_for(std::chrono::milliseconds(4));
    std::lock_guard<std::mutex> lock(mu);
    if (!neighbour_computing || lane < 0 || lane > 1) return;
    ++done[lane];
    ++steps_beside[lane];
    most_apart = std::max(most_apart, std::abs(done[0] - 2 * done[1]));
  }
  bool neighbour_computing = false;  // Guarded by mu, as the counts.
  int done[2] = {0, 0};
  int steps_beside[2] = {0, 0};
  int most_apart = 0;
};

// The small ResNet profiled on `target` at microbatches up to 2.
absl::StatusOr<proto::ProfileFile> ProfileResnetOn(Target* target, const std::string& name,
                                                   int repeats) {
  const std::string path = Tmp(name);
  common::TrainingData sample = WriteResnet(path);
  ProfilerOptions options;
  options.max_microbatch = 2;
  options.repeats = repeats;
  options.target = target;
  return ProfileModel(path, sample, options);
}

// A neighbour that fails while the vLayers are timed beside busy devices
// fails the profile, naming it: its times would otherwise be the lone
// device's, recorded as the busy ones.
TEST(TargetTest, ANeighbourThatFailsFailsTheTimesBesideIt) {
  NeighbourFailsTarget fake(3ull << 20);
  absl::StatusOr<proto::ProfileFile> profile = ProfileResnetOn(&fake, "resnet_neighbour.pt", 1);
  ASSERT_FALSE(profile.ok());
  EXPECT_NE(profile.status().message().find("beside 1 busy devices: device 1 stopped"),
            std::string::npos)
      << profile.status();
  EXPECT_NE(profile.status().message().find("device 1 lost its memory"), std::string::npos)
      << profile.status();
}

// A profile's times of its fitting steps summed, alone and beside the
// other devices, at microbatch `size` (0: every size); the least beside.
struct StepSums {
  double alone = 0, beside = 0, least_beside = 1e9;
  int steps = 0;
};
StepSums SumSteps(const proto::ProfileFile& profile, int size) {
  StepSums s;
  auto add = [&](double alone, double beside) {
    s.alone += alone;
    s.beside += beside;
    s.least_beside = std::min(s.least_beside, beside);
    ++s.steps;
  };
  for (const proto::VLayerProfile& v : profile.profile().vlayers()) {
    for (const proto::MicrobatchProfile& m : v.by_microbatch()) {
      if (size != 0 && m.size() != size) continue;
      if (m.forward_fits()) add(m.forward_time_s(), m.forward_time_busy_s());
      if (m.backward_fits()) add(m.backward_time_s(), m.backward_time_busy_s());
    }
  }
  return s;
}

// Beside busy devices each step starts on every device at once and its
// time is the mean of theirs (vlayer_timing.h): a neighbour 4 ms slower per
// step holds the timed device to within a step of it, and adds half its
// 4 ms to every time beside it. Free-running neighbours left a GPU
// partition's backward the GPU to itself at random (H200, 11-28). The
// timed device runs each step alone right before it runs it beside them
// (its two steps to the neighbour's one), and the neighbour's 4 ms stay out
// of the time alone.
TEST(TargetTest, BesideBusyDevicesEveryStepStartsOnEachAtOnce) {
  SlowNeighbourTarget fake(1ull << 30);
  absl::StatusOr<proto::ProfileFile> profile = ProfileResnetOn(&fake, "resnet_in_step.pt", 2);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_GT(fake.steps_beside[1], 10);
  // Its first step alone may end before the neighbour starts (once per size).
  EXPECT_LE(fake.steps_beside[0], 2 * fake.steps_beside[1]);
  EXPECT_GE(fake.steps_beside[0], 2 * fake.steps_beside[1] - 2);
  EXPECT_LE(fake.most_apart, 2);
  const StepSums t = SumSteps(*profile, 0);
  EXPECT_GE(t.least_beside, 0.002);
  // Half the neighbour's 4 ms, on average (a loaded machine moves single
  // steps by milliseconds either way).
  ASSERT_GT(t.steps, 10);
  EXPECT_GT((t.beside - t.alone) / t.steps, 0.001)
      << t.alone << " s alone, " << t.beside << " s beside";
}

// A partition-like target that slows down as it goes, as a VM's speed
// drifts: while the vLayers are timed beside the other device, every step
// ends 0.5 ms later than the one before it, on whichever device. Of kind
// cpu, as SlowNeighbourTarget.
class DriftingTarget : public LaneTarget {
 public:
  using LaneTarget::LaneTarget;
  std::string kind() const override { return "cpu"; }
  void Entered(int lane, Role role, bool in) override {
    if (lane != 1 || role != Role::kCompute) return;
    if (in) steps_ = 0;
    drifting_ = in;
  }
  void Synchronize() override {
    if (tls_lane < 0 || !drifting_) return;
    const int steps = steps_.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds(500 * steps));
  }

 private:
  std::atomic<bool> drifting_{false};
  std::atomic<int> steps_{0};
};

// Each step is timed beside the other devices right after its time alone
// (vlayer_timing.h), so a machine that slows down as the profile goes on
// does not read as a slowdown beside them: a step's two times lie 1-2 steps
// (0.5-1 ms of drift) apart. Timed as a run of passes alone, then one
// beside, they would lie a pass apart (about 20 steps, 10 ms).
TEST(TargetTest, AMachineThatSlowsDownDoesNotReadAsSlowerBesideBusyDevices) {
  DriftingTarget fake(1ull << 30);
  absl::StatusOr<proto::ProfileFile> profile = ProfileResnetOn(&fake, "resnet_drift.pt", 1);
  ASSERT_TRUE(profile.ok()) << profile.status();
  for (int size : {1, 2}) {
    const StepSums t = SumSteps(*profile, size);
    ASSERT_GT(t.steps, 10) << "microbatch " << size;
    // Room for a loaded machine: two devices computing at once are slower
    // than one (1.2 ms per step more with 4 tests running on 2 cores).
    EXPECT_LT((t.beside - t.alone) / t.steps, 0.004)
        << "microbatch " << size << ": " << t.alone << " s alone, " << t.beside << " s beside";
  }
}

TEST(TargetTest, CudaInABuildWithoutItIsExplained) {
  absl::StatusOr<std::unique_ptr<Target>> t =
      CreateTarget({common::DeviceSpec::Kind::kCuda, 4, 11ull << 30});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(t.status().message().find("needs a CUDA build"), std::string::npos) << t.status();
  absl::StatusOr<std::unique_ptr<Target>> none =
      CreateTarget({common::DeviceSpec::Kind::kCpu, 0, 0});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("cpu:2x512MiB"), std::string::npos) << none.status();
}

}  // namespace
}  // namespace harmony::planner
