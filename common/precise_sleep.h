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
// On a busy host a thread whose sleep ends waits for a core besides: the
// virtual devices' compute threads hold both of the bench VM's, and Linux
// (6.6 on, EEVDF) let the copy threads that woke run only after the
// running thread's slice, 1.4 ms there. The host link's emulated copies
// came back 1.7 ms late at the 99th percentile going in and 2.9 ms going
// out (a device's next copy waits for its previous one's return, so the
// link idled: zoo vgg on 2 x 4.50 MiB, minibatch 256, emulated 197.74
// MB/s, AMD EPYC). So the first PreciseSleepFor of a thread also asks
// for the shortest slice (0.1 ms, sched_setattr's sched_runtime; Linux
// 6.12 on, unprivileged; earlier kernels ignore it), keeping its policy
// and nice value: a sleeper that wakes then runs within about its slice.
// With it: 0.30-0.44 ms and 0.81-0.87 ms (3 runs); the simulator's error
// at the run's compute speed went from -12% to -15% to -10% to -12%
// (3 pairs), at minibatch 64 from -9% to -12% to -7% to -9% (4 pairs).
//
// Thread-safety: thread-safe; the slack and the slice are per thread.

#ifndef HARMONY_COMMON_PRECISE_SLEEP_H_
#define HARMONY_COMMON_PRECISE_SLEEP_H_

#include <cstdint>

namespace harmony::common {

// Sleeps `seconds` (nothing when <= 0) with the calling thread's timer
// slack at 1 ns and, where the kernel has them, its slice the shortest.
void PreciseSleepFor(double seconds);

// The calling thread's scheduling slice in nanoseconds as the kernel
// reports it (sched_getattr's sched_runtime: 0 before Linux 6.12 for
// threads that are not SCHED_DEADLINE; -1 where the platform has none).
int64_t SchedulingSliceNs();

// The slice PreciseSleepFor asks for: the least Linux allows.
inline constexpr int64_t kShortSliceNs = 100'000;

// The calling thread's timer slack in nanoseconds (-1 where the platform
// has none).
int64_t TimerSlackNs();

}  // namespace harmony::common

#endif  // HARMONY_COMMON_PRECISE_SLEEP_H_
