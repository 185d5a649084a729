#include "common/intra_op_threads.h"

#include <omp.h>

#include <algorithm>
#include <thread>

#include <ATen/Parallel.h>

#include "absl/strings/str_cat.h"

namespace harmony::common {

int HostThreads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

absl::StatusOr<int> ThreadsPerDevice(int requested, int devices) {
  if (requested < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads per device must be 0 (the host's ", HostThreads(),
        " hardware threads divided among the devices) or more, got ", requested));
  }
  if (requested > 0) return requested;
  return std::max(1, HostThreads() / std::max(1, devices));
}

int CallingThreadIntraOpThreads() { return at::get_num_threads(); }

void SetCallingThreadIntraOpThreads(int threads) {
  // LibTorch sets a thread's count from its process-wide one the first time
  // the thread runs a parallel kernel (at::internal::lazy_init_num_threads,
  // which at::get_num_threads runs too): let that happen first, or it would
  // undo this setting later.
  at::get_num_threads();
  omp_set_num_threads(std::max(1, threads));
}

ScopedIntraOpThreads::ScopedIntraOpThreads(int threads) : saved_(CallingThreadIntraOpThreads()) {
  SetCallingThreadIntraOpThreads(threads);
}

ScopedIntraOpThreads::~ScopedIntraOpThreads() { SetCallingThreadIntraOpThreads(saved_); }

}  // namespace harmony::common
