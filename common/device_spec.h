// The devices a command runs on, as given on its command line:
//   "cpu:4x2GiB"  four virtual CPU devices of 2 GiB each;
//   "cuda"        every local CUDA device; "cuda:2" the first two;
//   "cuda:4x10GiB" four partitions of 10 GiB each, spread over the local
//                 CUDA devices in turn (all four on one GPU when it is alone).
//
// Thread-safety: stateless functions.

#ifndef HARMONY_COMMON_DEVICE_SPEC_H_
#define HARMONY_COMMON_DEVICE_SPEC_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace harmony::common {

struct DeviceSpec {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  // Number of devices; 0 with kCuda means all that are present.
  int count = 0;
  // Bytes per device: virtual CPU devices, CUDA partitions (0 with kCuda:
  // whole GPUs).
  uint64_t capacity = 0;

  std::string ToString() const;
};

// InvalidArgument quoting the text when it is neither form.
absl::StatusOr<DeviceSpec> ParseDeviceSpec(absl::string_view text);

// FailedPrecondition for a CUDA `spec` in a build without CUDA: this build
// `does` (e.g. "runs") on virtual CPU devices only, with the remedy.
absl::Status CudaBuildNeeded(const DeviceSpec& spec, absl::string_view does);

}  // namespace harmony::common

#endif  // HARMONY_COMMON_DEVICE_SPEC_H_
