// The profiler (harmony-plan profile): measures what the schedule search
// needs, per vLayer and per microbatch size u, on the devices given.
// docs/DESIGN.md §5.
//
// For each u (powers of two up to the largest that fits, plus that largest,
// found by probing against the device memory) and each vLayer it measures:
// forward time, backward time including the recompute, peak device memory of
// each (counted by the accounting allocator, with the vLayer's weights and
// inputs copied onto the device), and the shapes and bytes of live-ins and
// live-outs. Per vLayer: parameter, buffer, gradient and optimizer-state
// bytes and the runtime's CPU optimizer's time (optim/). Per device set: host->device,
// device->host, all-devices-at-once and device-to-device bandwidth. Times
// are medians of `repeats` runs (each vLayer warmed up once); the times
// taken in turn, which the planner uses, are means (vlayer_timing.h).
//
// Thread-safety: a Profile call is confined to its thread; it uses
// LibTorch's global CPU generator and installs the accounting allocator.

#ifndef HARMONY_PLANNER_PROFILE_PROFILER_H_
#define HARMONY_PLANNER_PROFILE_PROFILER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device_spec.h"
#include "common/loss.h"
#include "common/tensor_file.h"
#include "common/denormals.h"
#include "planner/profile/machine.h"
#include "proto/plan.pb.h"

namespace harmony::planner {

class Target;  // target.h.

inline constexpr uint32_t kProfileSchemaVersion = 1;

struct ProfilerOptions {
  // Virtual CPU devices "cpu:NxSIZE", or CUDA ("cuda", "cuda:N",
  // "cuda:NxSIZE") in a build with it.
  common::DeviceSpec devices;
  // Where the vLayers run (borrowed, outlives the call; target.h); null:
  // CreateTarget(devices). Tests give a fake.
  Target* target = nullptr;
  // vLayer granularity (see common::DecomposeOptions).
  int granularity = 0;
  // Cut vLayers holding more parameter bytes than this along their modules
  // (common::DecomposeOptions::max_vlayer_weight_bytes); 0: no limit.
  uint64_t max_vlayer_weight_bytes = 0;
  // Every block cut once more along its own modules
  // (common::DecomposeOptions::split_blocks).
  bool split_blocks = false;
  // > 0: measure nothing and return absl::CancelledError unless the model
  // splits into more vLayers than this (harmony-plan asks for finer cuts
  // only when they change the decomposition).
  int more_vlayers_than = 0;
  // "sgd" (one momentum buffer per parameter), "adam" or "adamw" (two).
  std::string optimizer = "sgd";
  common::LossKind loss = common::LossKind::kAuto;
  // The element of forward's output to train on (common/model_output.h);
  // empty: the first scalar tensor, else the first tensor.
  std::string loss_output;
  // Probing stops here (the planner never needs a microbatch larger than
  // the minibatch).
  int max_microbatch = 256;
  // Profile only the smallest microbatch that runs (1, or 2 for a model
  // that cannot train on one sample) and stop, fitting or not.
  bool smallest_only = false;
  // Not empty: profile exactly these microbatch sizes (no probing for the
  // largest that fits; max_microbatch and smallest_only are ignored), as
  // harmony-plan profile --microbatches: the vLayers timed again at the sizes
  // a plan uses, right before it runs (harmony-plan simulate --times-from).
  std::vector<int> microbatches;
  // Intra-op threads of each device, as harmony-exec's --threads-per-device
  // (0: the host's hardware threads divided among the devices). Every
  // vLayer is timed on this many, as the runtime will compute it.
  int threads_per_device = 0;
  // Denormal floats flushed to zero on every thread that computes
  // (common/denormals.h), as the runtime will; recorded in the profile.
  bool flush_denormal = common::kDefaultFlushDenormal;
  // The plan's precision (proto::Configuration.precision): with bf16 the
  // vLayers are profiled as the runtime runs them, on bf16 parameters under
  // autocast (common/autocast.h); parameter and gradient bytes are the bf16
  // copies', host_parameter_bytes the fp32 masters'.
  bool bf16 = false;
  // With bf16: the bf16 parameters' gradients summed and returned in fp32
  // (Profile.fp32_gradients): their bytes and the backward's peaks are
  // fp32's.
  bool fp32_gradients = false;
  // Timed runs per measurement; the median is kept (the mean for the
  // times taken in turn). Each vLayer is warmed up once, before its first
  // measurement.
  int repeats = 3;
  // Called with a line of progress ("vLayer 3/12, microbatch 16"); may be
  // empty.
  std::function<void(const std::string&)> progress;
};

// Profiles the TorchScript model at `model_path` with `sample` (one or more
// samples; they are repeated to make larger microbatches).
//
// Errors: the file is not TorchScript, or forward does not match the sample
// (InvalidArgument, showing forward's arguments and the sample's tensors);
// even one sample does not fit a device (ResourceExhausted, with the peak
// and the capacity); CUDA asked of a build without it, or of a machine
// without a GPU (FailedPrecondition).
absl::StatusOr<proto::ProfileFile> ProfileModel(
    const std::string& model_path, const common::TrainingData& sample,
    const ProfilerOptions& options);

// A profile for a model too large to instantiate: `base`'s vLayers before
// `block`, then `num_blocks` copies of vLayer `block`, then the vLayers
// after the last of `base`'s copies of that block (`block_count` of them
// in `base`). With `width_scale` s != 1 the block is scaled to a model s
// times as wide: weights and compute by s^2, activations by s. Sizes of the
// copies are the block's, their times at each microbatch size the median
// over `base`'s blocks; the result is marked synthesized.
// With `seq_scale` q != 1, sequences q times as long: activations and
// compute scale by q more, and a microbatch of u runs at the per-sample
// efficiency measured at u x q samples (as many tokens). `compute_scale` multiplies every time (e.g. 0.001
// to plan for devices 1000 times faster than the one profiled).
absl::StatusOr<proto::ProfileFile> SynthesizeProfile(
    const proto::ProfileFile& base, int block, int block_count, int num_blocks,
    double width_scale, double seq_scale = 1.0, double compute_scale = 1.0);

// Reads and writes profile files (JSON). InvalidArgument naming the file
// when it is not a profile; FailedPrecondition for a newer schema.
absl::Status WriteProfileFile(const std::string& path,
                              const proto::ProfileFile& profile);
absl::StatusOr<proto::ProfileFile> ReadProfileFile(const std::string& path);

// The summary table printed after profiling: one row per vLayer with its
// parameters, activation bytes, forward/backward ms at the largest u and
// peak memory.
std::string ProfileSummary(const proto::ProfileFile& profile);

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_PROFILE_PROFILER_H_
