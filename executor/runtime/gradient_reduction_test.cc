#include "executor/runtime/gradient_reduction.h"

#include <thread>

#include <ATen/ATen.h>

#include "gtest/gtest.h"

namespace harmony::executor {
namespace {

TEST(GradientReductionTest, AHandOverReturnsOnceSummed) {
  GradientReduction r;
  r.StartIteration();
  absl::Status handed = absl::UnknownError("not returned");
  std::thread device1([&] { handed = r.Hand(7, {{at::full({2}, 3.0)}}); });
  absl::StatusOr<std::vector<std::vector<at::Tensor>>> theirs = r.Take(7);  // Waits for it.
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ((*theirs)[0][0].sum().item<float>(), 6.0f);
  r.Summed(7);
  device1.join();
  EXPECT_TRUE(handed.ok()) << handed;
}

TEST(GradientReductionTest, StopEndsTheWaits) {
  GradientReduction r;
  r.StartIteration();
  absl::Status handed;
  std::thread device1([&] { handed = r.Hand(1, {}); });  // Nobody sums it.
  std::thread stopper([&] { r.Stop(); });
  stopper.join();
  device1.join();
  EXPECT_TRUE(absl::IsCancelled(handed)) << handed;
  EXPECT_TRUE(absl::IsCancelled(r.Take(2).status()));
  r.StartIteration();  // The next iteration waits again.
  std::thread device2([&] { handed = r.Hand(2, {}); });
  EXPECT_TRUE(r.Take(2).ok());
  r.Summed(2);
  device2.join();
  EXPECT_TRUE(handed.ok()) << handed;
}

}  // namespace
}  // namespace harmony::executor
