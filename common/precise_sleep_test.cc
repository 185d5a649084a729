#include "common/precise_sleep.h"

#if defined(__linux__)
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <chrono>
#include <cstdint>
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

#if defined(__linux__)
// The first precise sleep of a thread asks for the shortest slice where the
// kernel has per-thread slices (it then reports the thread's slice, above
// 0), keeping the thread's policy and nice value; elsewhere nothing changes.
TEST(PreciseSleepTest, AsksForTheShortestSliceKeepingPolicyAndNice) {
  int64_t before = -2, after = -2, other_after = -2;
  int nice_after = -100, policy_after = -1;
  std::thread t([&] {
    const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
    ASSERT_EQ(setpriority(PRIO_PROCESS, static_cast<id_t>(tid), 2), 0);  // Raising: unprivileged.
    before = SchedulingSliceNs();
    PreciseSleepFor(1e-4);
    after = SchedulingSliceNs();
    nice_after = getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
    policy_after = sched_getscheduler(0);
  });
  t.join();
  std::thread u([&] { other_after = SchedulingSliceNs(); });
  u.join();
  ASSERT_GE(before, 0) << "sched_getattr failed";
  if (before > 0) {
    EXPECT_EQ(after, kShortSliceNs);
    EXPECT_NE(other_after, kShortSliceNs);  // Another thread keeps its own.
  } else {
    EXPECT_EQ(after, before);  // No per-thread slices (before Linux 6.12).
  }
  EXPECT_EQ(nice_after, 2);
  EXPECT_EQ(policy_after, SCHED_OTHER);
}
#endif

}  // namespace
}  // namespace harmony::common
