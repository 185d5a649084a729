#include "planner/profile/target.h"

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
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
      if (a.backward_fits()) EXPECT_EQ(a.backward_peak_bytes(), b.backward_peak_bytes());
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

// A partition-like target whose second device (lane 1, a neighbour while
// the vLayers are timed beside busy devices) fails every copy onto it.
class NeighbourFailsTarget : public PartitionLikeTarget {
 public:
  using PartitionLikeTarget::PartitionLikeTarget;

  class LaneScope : public Scope {
   public:
    LaneScope(int lane, std::unique_ptr<Scope> inner)
        : inner_(std::move(inner)), saved_(tls_lane) {
      tls_lane = lane;
    }
    ~LaneScope() override { tls_lane = saved_; }

   private:
    std::unique_ptr<Scope> inner_;
    const int saved_;
  };
  class LaneMeter : public Meter {
   public:
    explicit LaneMeter(std::unique_ptr<Meter> inner) : inner_(std::move(inner)) {}
    uint64_t capacity() const override { return inner_->capacity(); }
    uint64_t used() const override { return inner_->used(); }
    uint64_t peak() const override { return inner_->peak(); }
    void ResetPeak() override { inner_->ResetPeak(); }
    absl::Status CheckPeak(const std::string& activity) const override {
      return inner_->CheckPeak(activity);
    }
    std::unique_ptr<Scope> Enter(int lane, Role role, std::string activity) override {
      return std::make_unique<LaneScope>(lane, inner_->Enter(lane, role, std::move(activity)));
    }

   private:
    const std::unique_ptr<Meter> inner_;
  };

  std::unique_ptr<Meter> NewMeter(uint64_t capacity) override {
    return std::make_unique<LaneMeter>(PartitionLikeTarget::NewMeter(capacity));
  }
  at::Tensor ToDevice(const at::Tensor& t) override {
    if (tls_lane == 1) throw std::runtime_error("device 1 lost its memory");
    return PartitionLikeTarget::ToDevice(t);
  }
};

// A neighbour that fails while the vLayers are timed beside busy devices
// fails the profile, naming it: its times would otherwise be the lone
// device's, recorded as the busy ones.
TEST(TargetTest, ANeighbourThatFailsFailsTheTimesBesideIt) {
  const std::string path = Tmp("resnet_neighbour.pt");
  common::TrainingData sample = WriteResnet(path);
  ProfilerOptions options;
  options.max_microbatch = 2;
  options.repeats = 1;
  NeighbourFailsTarget fake(3ull << 20);
  options.target = &fake;
  absl::StatusOr<proto::ProfileFile> profile = ProfileModel(path, sample, options);
  ASSERT_FALSE(profile.ok());
  EXPECT_NE(profile.status().message().find("beside 1 busy devices: device 1 stopped"),
            std::string::npos)
      << profile.status();
  EXPECT_NE(profile.status().message().find("device 1 lost its memory"), std::string::npos)
      << profile.status();
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
