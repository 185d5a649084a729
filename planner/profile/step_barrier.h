// StepBarrier: lanes that compute each step side by side (the profiler's
// vLayers timed beside busy devices, vlayer_timing.cc): every lane waits
// at Arrive until all have come. A lane that stops early Leaves; the
// others' Arrive then returns false and they stop too, instead of waiting
// for it.
//
// Thread-safety: thread-safe.

#ifndef HARMONY_PLANNER_PROFILE_STEP_BARRIER_H_
#define HARMONY_PLANNER_PROFILE_STEP_BARRIER_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace harmony::planner::timing {

class StepBarrier {
 public:
  explicit StepBarrier(int lanes) : lanes_(lanes) {}
  StepBarrier(const StepBarrier&) = delete;
  StepBarrier& operator=(const StepBarrier&) = delete;

  // Returns when every lane has arrived (true), or once one has left (false).
  bool Arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    if (left_) return false;
    const int64_t generation = generation_;
    if (++arrived_ == lanes_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return true;
    }
    cv_.wait(lock, [&] { return generation_ != generation || left_; });
    return generation_ != generation;
  }
  void Leave() {
    std::lock_guard<std::mutex> lock(mu_);
    left_ = true;
    cv_.notify_all();
  }

 private:
  const int lanes_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;         // Guarded by mu_.
  int64_t generation_ = 0;  // Steps all lanes have started; guarded by mu_.
  bool left_ = false;       // Guarded by mu_.
};

}  // namespace harmony::planner::timing

#endif  // HARMONY_PLANNER_PROFILE_STEP_BARRIER_H_
