// The host link's emulation (docs/DESIGN.md §6): one link between the host and
// all devices, full duplex, at a given bandwidth per direction. A copy made
// at memory speed is held until its bytes would have crossed the link:
// transfers in one direction queue one after another, each counted from
// when its real copy began (the copy happens on the link, not before it)
// or from when the link is free, whichever is later. Figures made so are
// labelled emulated. With no bandwidth, nothing is held.
//
// Either way the link keeps what crossed it per direction (TakeUse): the
// bytes, and the seconds during which at least one copy was crossing, so
// that bytes / busy seconds is the link's rate while in use, however many
// devices copied at once (on a GPU, the rate the swaps get from PCIe).
// Emulated, it also keeps how late its copies came back past their emulated
// end: a copy thread that wakes late (its core busy with compute) holds its
// device's next step, where a real link's copy would have been done.
//
// Thread-safety: thread-safe.

#ifndef HARMONY_EXECUTOR_RUNTIME_HOST_LINK_H_
#define HARMONY_EXECUTOR_RUNTIME_HOST_LINK_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace harmony::executor {

enum class LinkDirection { kToDevice = 0, kToHost = 1 };

// What crossed the link in one direction: bytes, and the seconds during
// which at least one copy was crossing (the union of the copies' spans).
// Emulated: how many copies crossed, and by how many seconds they came back
// after their emulated end, summed and the largest (0 when not emulated).
struct LinkUse {
  uint64_t bytes = 0;
  double busy_s = 0;
  int64_t copies = 0;
  double late_s = 0;
  double late_max_s = 0;
};

class HostLink {
 public:
  // `bytes_per_s` per direction; 0: no emulation.
  explicit HostLink(double bytes_per_s);

  bool emulated() const { return bytes_per_s_ > 0; }
  double bytes_per_s() const { return bytes_per_s_; }

  // Seconds since the link was made: the runtime's clock.
  double Now() const;

  // Holds the caller until `bytes` have crossed in `direction`, counting
  // from `since` (a Now() value) or from when the link is free.
  // Emulated or not, the copy's span (from `since` until now, or its
  // emulated span) and bytes count in the link's use; emulated, so does how
  // late the caller is let go past the copy's emulated end.
  void Cross(LinkDirection direction, uint64_t bytes, double since);

  // The use in `direction` since the last TakeUse of it (or since the link
  // was made), which starts afresh.
  LinkUse TakeUse(LinkDirection direction);

 private:
  const double bytes_per_s_;
  const std::chrono::steady_clock::time_point epoch_;
  std::mutex mu_;
  double free_at_[2] = {0, 0};  // Guarded by mu_.
  // Per direction, since the last TakeUse: bytes, and the copies' spans.
  uint64_t bytes_[2] = {0, 0};                          // Guarded by mu_.
  std::vector<std::pair<double, double>> spans_[2];     // Guarded by mu_.
  int64_t copies_[2] = {0, 0};                          // Guarded by mu_.
  double late_s_[2] = {0, 0}, late_max_s_[2] = {0, 0};  // Guarded by mu_.
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_HOST_LINK_H_
