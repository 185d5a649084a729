#include "executor/runtime/stream.h"

#include <atomic>
#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace harmony::executor {
namespace {

TEST(StreamTest, RunsInOrderOnOneThread) {
  std::vector<int> order;
  std::thread::id first;
  bool same_thread = true;
  {
    Stream s;
    for (int i = 0; i < 100; ++i) {
      s.Post([&, i] {
        if (i == 0) first = std::this_thread::get_id();
        same_thread = same_thread && std::this_thread::get_id() == first;
        order.push_back(i);
      });
    }
    s.Drain();
    ASSERT_EQ(order.size(), 100u);
  }
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_TRUE(same_thread);
  EXPECT_NE(first, std::this_thread::get_id());
}

TEST(StreamTest, ReleasesCapturesWhenDone) {
  Stream s;
  auto held = std::make_shared<int>(7);
  std::weak_ptr<int> watch = held;
  s.Post([held = std::move(held)] { EXPECT_EQ(*held, 7); });
  s.Drain();
  EXPECT_TRUE(watch.expired());
}

TEST(StreamTest, SetupRunsFirstAndDestructorRunsTheRest) {
  std::atomic<int> ran{0};
  int seen_at_first = -1;
  {
    Stream s([&] { ran = 100; });
    s.Post([&] { seen_at_first = ran.load(); });
    for (int i = 0; i < 10; ++i) s.Post([&] { ++ran; });
  }
  EXPECT_EQ(seen_at_first, 100);
  EXPECT_EQ(ran.load(), 110);
}

}  // namespace
}  // namespace harmony::executor
