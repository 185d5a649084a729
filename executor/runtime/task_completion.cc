#include "executor/runtime/task_completion.h"

namespace harmony::executor {

void TaskCompletion::StartIteration(int tasks) {
  std::lock_guard<std::mutex> lock(mu_);
  done_.assign(tasks, false);
  error_ = absl::OkStatus();
  losses_.clear();
}

void TaskCompletion::MarkDone(int task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (task >= 0 && task < static_cast<int>(done_.size())) done_[task] = true;
  cv_.notify_all();
}

absl::Status TaskCompletion::WaitDone(const std::vector<int>& tasks) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    if (!error_.ok()) return true;
    for (int t : tasks) {
      if (t >= 0 && t < static_cast<int>(done_.size()) && !done_[t]) return false;
    }
    return true;
  });
  if (!error_.ok()) return absl::CancelledError("stopped: a task failed");
  return absl::OkStatus();
}

bool TaskCompletion::AllDone(const std::vector<int>& tasks) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (int t : tasks) {
    if (t < 0 || t >= static_cast<int>(done_.size()) || !done_[t]) return false;
  }
  return true;
}

bool TaskCompletion::Fail(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  cv_.notify_all();
  if (!error_.ok()) return false;
  error_ = status;
  return true;
}

absl::Status TaskCompletion::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void TaskCompletion::AddLoss(int offset, double loss) {
  std::lock_guard<std::mutex> lock(mu_);
  losses_[offset] = loss;
}

double TaskCompletion::TotalLoss() const {
  std::lock_guard<std::mutex> lock(mu_);
  double total = 0;
  for (const auto& [offset, loss] : losses_) total += loss;
  return total;
}

}  // namespace harmony::executor
