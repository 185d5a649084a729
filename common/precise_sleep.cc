#include "common/precise_sleep.h"

#include <chrono>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#endif

// Per-thread scheduling attributes (sched_getattr, sched_setattr).
#if defined(__linux__) && defined(SYS_sched_setattr) && defined(SYS_sched_getattr)
#define HARMONY_HAS_SCHED_ATTR 1
#endif

namespace harmony::common {
namespace {

#if defined(HARMONY_HAS_SCHED_ATTR)
// The kernel's struct sched_attr, as of its first version (48 bytes).
struct SchedAttr {
  uint32_t size = sizeof(SchedAttr);
  uint32_t policy = 0;
  uint64_t flags = 0;
  int32_t nice = 0;
  uint32_t priority = 0;
  uint64_t runtime = 0;  // A fair thread's slice (Linux 6.12 on).
  uint64_t deadline = 0;
  uint64_t period = 0;
};

bool GetAttr(SchedAttr* a) {
  return syscall(SYS_sched_getattr, 0, a, sizeof(SchedAttr), 0) == 0;
}

// Asks for the shortest slice, keeping the thread's policy and nice value;
// nothing for policies other than SCHED_OTHER (a real-time or idle thread
// stays as its owner set it).
void AskForShortSlice() {
  SchedAttr a;
  if (!GetAttr(&a) || a.policy != SCHED_OTHER) return;
  a.size = sizeof(SchedAttr);
  a.flags = 0;
  a.runtime = static_cast<uint64_t>(kShortSliceNs);
  a.deadline = a.period = 0;
  const int saved = errno;
  syscall(SYS_sched_setattr, 0, &a, 0);  // Best effort: refused, nothing changes.
  errno = saved;
}
#else
void AskForShortSlice() {}
#endif

}  // namespace

void PreciseSleepFor(double seconds) {
#if defined(__linux__)
  thread_local bool slack_set = false;
  if (!slack_set) {
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    AskForShortSlice();
    slack_set = true;
  }
#endif
  if (seconds <= 0) return;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

int64_t TimerSlackNs() {
#if defined(__linux__)
  return prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);
#else
  return -1;
#endif
}

int64_t SchedulingSliceNs() {
#if defined(HARMONY_HAS_SCHED_ATTR)
  SchedAttr a;
  return GetAttr(&a) ? static_cast<int64_t>(a.runtime) : -1;
#else
  return -1;
#endif
}

}  // namespace harmony::common
