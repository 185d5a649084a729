#include "common/precise_sleep.h"

#include <chrono>
#include <thread>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace harmony::common {

void PreciseSleepFor(double seconds) {
#if defined(__linux__)
  thread_local bool slack_set = false;
  if (!slack_set) {
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
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

}  // namespace harmony::common
