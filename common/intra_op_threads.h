// Each device's share of the host's cores: how many intra-op threads
// LibTorch's kernels (ATen's parallel loops, oneDNN, OpenBLAS's OpenMP
// build) use on a thread that computes for one device.
//
// N virtual devices compute at once from N threads of one process. With
// every thread's kernels on all cores, N devices oversubscribe the cores
// (measured: the bench's GPT 1.75x slower with 2 devices x 2 threads than
// x 1 on 2 cores). So a device computes on cores/N threads by default, at
// least 1. The setting is per calling thread (OpenMP's nthreads-var is a
// per-thread ICV; Debian's LibTorch and OpenBLAS are OpenMP builds), so
// devices, the profiler's timings and a reference loop can each have their
// own count in one process. Some kernels round differently at another count,
// so a loop compared bit for bit must compute on the same count.
//
// Thread-safety: thread-safe; each call acts on its calling thread only.

#ifndef HARMONY_COMMON_INTRA_OP_THREADS_H_
#define HARMONY_COMMON_INTRA_OP_THREADS_H_

#include "absl/status/statusor.h"

namespace harmony::common {

// The host's hardware threads (std::thread::hardware_concurrency, at least
// 1).
int HostThreads();

// Intra-op threads per device: `requested` when > 0, else the host's
// hardware threads divided among `devices` (at least 1 each).
// InvalidArgument for a negative request.
absl::StatusOr<int> ThreadsPerDevice(int requested, int devices);

// LibTorch's intra-op threads on the calling thread.
int CallingThreadIntraOpThreads();

// Sets LibTorch's intra-op threads on the calling thread only (other
// threads keep theirs; threads started later start from LibTorch's
// process-wide count). `threads` >= 1.
void SetCallingThreadIntraOpThreads(int threads);

// Sets the calling thread's intra-op threads while alive, then restores
// them. Confined to its thread.
class ScopedIntraOpThreads {
 public:
  explicit ScopedIntraOpThreads(int threads);
  ~ScopedIntraOpThreads();
  ScopedIntraOpThreads(const ScopedIntraOpThreads&) = delete;
  ScopedIntraOpThreads& operator=(const ScopedIntraOpThreads&) = delete;

 private:
  int saved_;
};

}  // namespace harmony::common

#endif  // HARMONY_COMMON_INTRA_OP_THREADS_H_
