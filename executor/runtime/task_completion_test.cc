#include "executor/runtime/task_completion.h"

#include <thread>

#include "gtest/gtest.h"

namespace harmony::executor {
namespace {

TEST(TaskCompletionTest, WaitsEndWhenTheTasksAreDoneOrAThreadFails) {
  TaskCompletion c;
  c.StartIteration(4);
  std::thread copy_out([&] {
    c.MarkDone(0);
    c.MarkDone(2);
  });
  EXPECT_TRUE(c.WaitDone({0, 2}).ok());  // Waits for both.
  copy_out.join();

  std::thread failing([&] { EXPECT_TRUE(c.Fail(absl::InternalError("first"))); });
  absl::Status waited = c.WaitDone({1});  // Never done: the failure ends it.
  failing.join();
  EXPECT_TRUE(absl::IsCancelled(waited)) << waited;
  EXPECT_FALSE(c.Fail(absl::InternalError("second")));  // The first error wins.
  EXPECT_EQ(c.error().message(), "first");

  c.StartIteration(4);  // A new iteration: nothing done, no error.
  EXPECT_TRUE(c.error().ok());
  c.MarkDone(3);
  EXPECT_TRUE(c.WaitDone({3}).ok());
}

TEST(TaskCompletionTest, LossesSumInSampleOrder) {
  TaskCompletion c;
  c.StartIteration(1);
  c.AddLoss(8, 0.25);
  c.AddLoss(0, 0.5);
  EXPECT_DOUBLE_EQ(c.TotalLoss(), 0.75);
  c.StartIteration(1);
  EXPECT_EQ(c.TotalLoss(), 0);
}

}  // namespace
}  // namespace harmony::executor
