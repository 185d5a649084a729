#include "executor/runtime/gradient_reduction.h"

#include <utility>

namespace harmony::executor {

namespace {

absl::Status Stopped() { return absl::CancelledError("stopped: another task failed"); }

}  // namespace

absl::Status GradientReduction::Hand(int task, std::vector<std::vector<at::Tensor>> grads) {
  std::unique_lock<std::mutex> lock(mu_);
  slots_[task] = std::move(grads);
  cv_.notify_all();
  cv_.wait(lock, [&] { return stopped_ || summed_.count(task) > 0; });
  if (stopped_) return Stopped();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<at::Tensor>>> GradientReduction::Take(int task) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return stopped_ || slots_.count(task) > 0; });
  if (stopped_) return Stopped();
  std::vector<std::vector<at::Tensor>> grads = std::move(slots_[task]);
  slots_.erase(task);
  return grads;
}

void GradientReduction::Summed(int task) {
  std::lock_guard<std::mutex> lock(mu_);
  summed_.insert(task);
  cv_.notify_all();
}

void GradientReduction::StartIteration() {
  std::lock_guard<std::mutex> lock(mu_);
  slots_.clear();
  summed_.clear();
  stopped_ = false;
}

void GradientReduction::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  slots_.clear();
  cv_.notify_all();
}

}  // namespace harmony::executor
