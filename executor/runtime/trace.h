// The runtime's trace (docs/DESIGN.md §10): what each device's compute thread
// and streams did, and the host's optimizer, as a Chrome trace laid out as
// the simulator's (a process per device, a thread per stream), so a run
// and its plan's simulation can be read side by side.
//
// Thread-safety: thread-safe.

#ifndef HARMONY_EXECUTOR_RUNTIME_TRACE_H_
#define HARMONY_EXECUTOR_RUNTIME_TRACE_H_

#include <mutex>
#include <string>
#include <vector>

namespace harmony::executor {

// The streams, numbered as the simulator's (planner/sim/simulator.h).
enum TraceStream { kSwapIn = 0, kSwapOut = 1, kCompute = 2, kPeer = 3, kWeightsIn = 4 };

class TraceRecorder {
 public:
  // Off: Add does nothing.
  explicit TraceRecorder(bool on) : on_(on) {}

  bool on() const { return on_; }
  // `device` -1: the host's optimizer. Times in seconds.
  void Add(int device, TraceStream stream, std::string name, double start_s, double end_s);

  // Chrome trace JSON of everything added, for `devices` devices; with an
  // emulated host link of `link_bytes_per_s` (> 0) the metadata says so.
  std::string ChromeJson(int devices, double link_bytes_per_s) const;

 private:
  struct Event {
    int device;
    int stream;
    std::string name;
    double start_s, end_s;
  };
  const bool on_;
  mutable std::mutex mu_;
  std::vector<Event> events_;  // Guarded by mu_.
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_TRACE_H_
