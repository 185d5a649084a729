#include "common/denormals.h"

#include <limits>
#include <thread>

#include <ATen/ATen.h>

#include "common/intra_op_threads.h"
#include "gtest/gtest.h"

namespace harmony::common {
namespace {

// 1e-30 x 1e-10 = 1e-40: a denormal float (the smallest normal is 1.2e-38).
// Over 2^20 elements at 2 intra-op threads, so the team computes part of it.
int64_t NonZeroDenormalProducts() {
  const at::Tensor a = at::full({1 << 20}, 1e-30f);
  return (a * 1e-10f).ne(0).sum().item<int64_t>();
}

TEST(DenormalsTest, FlushReachesTheIntraOpTeamAndNewThreads) {
  ScopedIntraOpThreads threads(2);
  ApplyFlushDenormal(false);
  EXPECT_FALSE(CallingThreadFlushesDenormal());
  EXPECT_EQ(NonZeroDenormalProducts(), 1 << 20);
  ApplyFlushDenormal(true);
  EXPECT_TRUE(CallingThreadFlushesDenormal());
  EXPECT_EQ(NonZeroDenormalProducts(), 0);
  // A denormal input reads as zero (DAZ).
  const float tiny = std::numeric_limits<float>::denorm_min() * 1000;
  EXPECT_EQ((at::full({4}, tiny) * 2.0f).ne(0).sum().item<int64_t>(), 0);
  // A thread started now inherits the policy.
  bool inherited = false;
  std::thread([&] { inherited = CallingThreadFlushesDenormal(); }).join();
  EXPECT_TRUE(inherited);
  // And back: the team follows again.
  ApplyFlushDenormal(false);
  EXPECT_EQ(NonZeroDenormalProducts(), 1 << 20);
}

TEST(DenormalsTest, ParsesOnAndOffAndSaysWhatElseItTakes) {
  EXPECT_TRUE(*ParseFlushDenormal("on"));
  EXPECT_FALSE(*ParseFlushDenormal("OFF"));
  absl::StatusOr<bool> bad = ParseFlushDenormal("maybe");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("takes on"), std::string::npos);
  EXPECT_NE(bad.status().message().find("\"maybe\""), std::string::npos);
  EXPECT_EQ(FlushDenormalName(true), "on");
  EXPECT_FALSE(CpuModelName().empty());
}

}  // namespace
}  // namespace harmony::common
