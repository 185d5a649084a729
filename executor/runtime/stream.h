// A stream: one thread that runs the closures posted to it, one at a time,
// in the order they were posted (as a CUDA stream runs its operations).
// The runtime gives each device a weights stream, a copy-in stream and a
// copy-out stream beside the device's compute thread, so swaps overlap
// compute the way the simulator's streams of the same names do.
//
// A closure is destroyed right after it has run, so what it captures (the
// device tensors a copy-out holds) is released when its work is done.
//
// Thread-safety: thread-safe. Post and Drain may be called from any thread
// but a closure running on the stream must not Drain its own stream.

#ifndef HARMONY_EXECUTOR_RUNTIME_STREAM_H_
#define HARMONY_EXECUTOR_RUNTIME_STREAM_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace harmony::executor {

class Stream {
 public:
  // `setup` runs first on the stream's thread (thread-local settings such
  // as the intra-op thread count).
  explicit Stream(std::function<void()> setup = nullptr);
  ~Stream();  // Runs what was posted, then joins.
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void Post(std::function<void()> work);
  // Waits until everything posted so far has run.
  void Drain();

 private:
  void Loop(std::function<void()> setup);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // Guarded by mu_.
  bool busy_ = false;                        // Guarded by mu_.
  bool stopping_ = false;                    // Guarded by mu_.
  std::thread thread_;
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_STREAM_H_
