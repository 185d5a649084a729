// What the profiler measures of the machine rather than of the model: copy
// bandwidths of virtual devices and the matrix multiply rate (which tells a
// slow BLAS), with the timing helpers both use.
//
// Thread-safety: stateless functions; MeasureBandwidths starts and joins
// its own threads.

#ifndef HARMONY_PLANNER_PROFILE_MACHINE_H_
#define HARMONY_PLANNER_PROFILE_MACHINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device_spec.h"
#include "proto/plan.pb.h"

namespace harmony::planner {

namespace machine {
// The median of `v` (0 when empty) and a monotonic clock in seconds.
double Median(std::vector<double> v);
double Now();
}  // namespace machine

// Host<->device copy bandwidths of virtual CPU devices (real copies): one
// device each way, all devices at once from threads that live across the
// measurements (as the runtime's device threads do), device to device.
// Median of `repeats`. Empty when the devices are too small to measure.
absl::StatusOr<proto::Bandwidths> MeasureBandwidths(const common::DeviceSpec& spec, int repeats);

// The fixed cost of handing work to another thread and waiting for it (a
// copy stream's hand-off), while `busy` other threads compute: the median
// over `repeats` round trips of posting to a worker that, when
// `worker_sleep_s` > 0, sleeps that long first (as an emulated link's copy
// thread does), minus that sleep. Seconds.
double MeasureHandoff(int busy, double worker_sleep_s, int repeats);

// The rate of an fp32 1024^3 matrix multiply on LibTorch's current
// intra-op threads, in FLOP/s (median of `repeats`, at least 3).
absl::StatusOr<double> MeasureGemmRate(int repeats);

// Below this many FLOP/s per pair of hardware threads, LibTorch runs on a
// slow BLAS (Debian's reference BLAS: ~7 GFLOP/s; OpenBLAS: ~100 per
// thread here; docs/blas.md).
inline constexpr double kSlowGemmPerCorePair = 20e9;

// A warning line with the remedy when `flop_per_s` is below
// kSlowGemmPerCorePair per pair of `host_threads`; empty otherwise.
std::string GemmWarning(double flop_per_s, int host_threads);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_PROFILE_MACHINE_H_
