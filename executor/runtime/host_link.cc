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
  if (bytes == 0) return;
  const int d = static_cast<int>(direction);
  if (bytes_per_s_ <= 0) {
    const double now = Now();
    std::lock_guard<std::mutex> lock(mu_);
    bytes_[d] += bytes;
    spans_[d].push_back({since, std::max(since, now)});
    return;
  }
  double end;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const double start = std::max(since, free_at_[d]);
    end = start + static_cast<double>(bytes) / bytes_per_s_;
    free_at_[d] = end;
    bytes_[d] += bytes;
    spans_[d].push_back({start, end});
  }
  const double wait = end - Now();
  common::PreciseSleepFor(wait);  // Not Linux's default 50 us late.
  // Late: woken after the end (the core ran another thread), or the real
  // copy took longer than the link would have.
  const double late = std::max(0.0, Now() - end);
  std::lock_guard<std::mutex> lock(mu_);
  ++copies_[d];
  late_s_[d] += late;
  late_max_s_[d] = std::max(late_max_s_[d], late);
}

LinkUse HostLink::TakeUse(LinkDirection direction) {
  const int d = static_cast<int>(direction);
  std::vector<std::pair<double, double>> spans;
  LinkUse use;
  {
    std::lock_guard<std::mutex> lock(mu_);
    spans.swap(spans_[d]);
    use.bytes = bytes_[d];
    bytes_[d] = 0;
    use.copies = copies_[d];
    use.late_s = late_s_[d];
    use.late_max_s = late_max_s_[d];
    copies_[d] = 0;
    late_s_[d] = late_max_s_[d] = 0;
  }
  std::sort(spans.begin(), spans.end());
  double covered_until = -1;  // Spans are on the link's clock, from 0.
  for (const auto& [from, until] : spans) {
    const double start = std::max(from, covered_until);
    if (until > start) use.busy_s += until - start;
    covered_until = std::max(covered_until, until);
  }
  return use;
}

}  // namespace harmony::executor
