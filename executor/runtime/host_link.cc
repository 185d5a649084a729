#include "executor/runtime/host_link.h"

#include <algorithm>

#include "common/precise_sleep.h"

namespace harmony::executor {

HostLink::HostLink(double bytes_per_s)
    : bytes_per_s_(bytes_per_s), epoch_(std::chrono::steady_clock::now()) {}

double HostLink::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count();
}

void HostLink::Cross(LinkDirection direction, uint64_t bytes, double since) {
  if (bytes_per_s_ <= 0 || bytes == 0) return;
  const int d = static_cast<int>(direction);
  double end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const double start = std::max(since, free_at_[d]);
    end = start + static_cast<double>(bytes) / bytes_per_s_;
    free_at_[d] = end;
  }
  const double wait = end - Now();
  common::PreciseSleepFor(wait);  // Not Linux's default 50 us late.
}

}  // namespace harmony::executor
