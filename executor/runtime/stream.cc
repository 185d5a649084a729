#include "executor/runtime/stream.h"

#include <utility>

namespace harmony::executor {

Stream::Stream(std::function<void()> setup)
    : thread_([this, setup = std::move(setup)]() mutable { Loop(std::move(setup)); }) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Stream::Post(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_all();
}

void Stream::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void Stream::Loop(std::function<void()> setup) {
  if (setup) setup();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // Stopping, and nothing left.
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    work();
    work = nullptr;  // Release what it captured before reporting idle.
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace harmony::executor
