// Sleeping to a deadline as closely as the kernel allows, for the host
// link's emulation (executor/runtime/host_link.h) and the profiler's
// measure of what such a sleep oversleeps (planner/profile/machine.h).
//
// Linux lets a sleeping thread wake up to its "timer slack" late (50 us by
// default) so that wake-ups can be batched. An emulated copy sleeps once
// per transfer, so that slack was paid on every one: on the 2-core bench
// VM a 100 us sleep overslept by 95 us at the median with the default
// slack and by 43 us with a slack of 1 ns. PreciseSleepFor sets the calling
// thread's slack to 1 ns (once per thread) and sleeps.
//
// Thread-safety: thread-safe; the slack is per thread.

#ifndef HARMONY_COMMON_PRECISE_SLEEP_H_
#define HARMONY_COMMON_PRECISE_SLEEP_H_

#include <cstdint>

namespace harmony::common {

// Sleeps `seconds` (nothing when <= 0) with the calling thread's timer
// slack at 1 ns.
void PreciseSleepFor(double seconds);

// The calling thread's timer slack in nanoseconds (-1 where the platform
// has none).
int64_t TimerSlackNs();

}  // namespace harmony::common

#endif  // HARMONY_COMMON_PRECISE_SLEEP_H_
