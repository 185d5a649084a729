#include "common/precise_sleep.h"

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace harmony::common {
namespace {

TEST(PreciseSleepTest, SetsTheCallingThreadsSlackOnlyAndSleepsAtLeastTheTime) {
  int64_t before = -1, after = -1, other = -1;
  double slept = 0;
  std::thread t([&] {
    before = TimerSlackNs();
    const auto start = std::chrono::steady_clock::now();
    PreciseSleepFor(2e-3);
    slept = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    after = TimerSlackNs();
    PreciseSleepFor(0);  // Nothing to sleep: returns.
  });
  t.join();
  std::thread u([&] { other = TimerSlackNs(); });
  u.join();
#if defined(__linux__)
  EXPECT_GT(before, 1);  // Linux's default: 50 us.
  EXPECT_EQ(after, 1);
  EXPECT_EQ(other, before);  // Another thread keeps its own.
#endif
  EXPECT_GE(slept, 2e-3);
}

}  // namespace
}  // namespace harmony::common
