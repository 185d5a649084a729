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

// A note when OpenBLAS (behind LibTorch's libblas.so.3) runs kernels
// without AVX-512 on a CPU that has it: held there by OPENBLAS_CORETYPE
// (Haswell on this project's VMs, where fp32 2048^3 matrix multiplies ran
// 1.9x as fast without it: AMD EPYC, Zen 5, 2 threads; OpenBLAS then picks
// Cooperlake), or because it took the CPU for an older one. Empty when the
// BLAS is not OpenBLAS, its core has AVX-512 kernels or the CPU has none.
std::string BlasCoreHint();
// The same from its parts: OpenBLAS's core name ("" when not OpenBLAS),
// whether the CPU has AVX-512 (F, BW, DQ and VL), OPENBLAS_CORETYPE (nullptr:
// unset).
std::string BlasCoreHintFor(const std::string& core, bool cpu_has_avx512, const char* coretype);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_PROFILE_MACHINE_H_
