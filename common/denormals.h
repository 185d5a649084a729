// Denormal (subnormal) floats: whether the CPU flushes them to zero.
//
// Arithmetic on denormals is slow on many x86 cores (measured on an Intel
// Xeon: a 32-layer plain conv stack's step 9.6x slower, convolution_backward
// 94% of the time; on AMD EPYC the effect is small). The backward of deep
// nets makes such tiny gradients. TensorFlow sets flush-to-zero (FTZ) and
// denormals-are-zero (DAZ) on its CPU threads by default; PyTorch leaves
// them off and offers torch.set_flush_denormal. Harmony's policy is one
// bool, "flush" (on) or "keep" (off), applied to every thread that
// computes or updates: FTZ and DAZ live in each thread's MXCSR, which a new
// thread inherits from the one that creates it.
//
// A loop compared with Harmony bit for bit must run under the same policy
// (torch.set_flush_denormal in Python, before any computation so that
// LibTorch's OpenMP threads inherit it).
//
// Thread-safety: each call acts on its calling thread (and its intra-op
// team) only.

#ifndef HARMONY_COMMON_DENORMALS_H_
#define HARMONY_COMMON_DENORMALS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace harmony::common {

// The default: flush (TensorFlow's choice; see the README's "Denormal
// numbers").
inline constexpr bool kDefaultFlushDenormal = true;

// Sets FTZ and DAZ on the calling thread. False where the CPU has no such
// control (not x86-64): nothing changed.
bool SetCallingThreadFlushDenormal(bool flush);

// Whether the calling thread flushes (FTZ and DAZ both set).
bool CallingThreadFlushesDenormal();

// The calling thread and every thread of its intra-op team (LibTorch's
// OpenMP threads at the calling thread's count), which may have been
// started under another policy.
void ApplyFlushDenormal(bool flush);

// ApplyFlushDenormal(flush) while alive, then the calling thread's policy
// from before, again with its team. Confined to its thread.
class ScopedFlushDenormal {
 public:
  explicit ScopedFlushDenormal(bool flush);
  ~ScopedFlushDenormal();
  ScopedFlushDenormal(const ScopedFlushDenormal&) = delete;
  ScopedFlushDenormal& operator=(const ScopedFlushDenormal&) = delete;

 private:
  bool saved_;
};

// "on" / "off", as the flags take them.
std::string FlushDenormalName(bool flush);
// "on" | "off" (also true/false, 1/0); InvalidArgument naming the choices.
absl::StatusOr<bool> ParseFlushDenormal(absl::string_view text);

// The CPU's model name (/proc/cpuinfo's "model name", else "unknown").
std::string CpuModelName();

}  // namespace harmony::common

#endif  // HARMONY_COMMON_DENORMALS_H_
