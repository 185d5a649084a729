// Profiles made up for tests of the search and the simulator: no model, no
// LibTorch, exact numbers.
//
// Thread-safety: stateless.

#ifndef HARMONY_PLANNER_SEARCH_TESTING_FAKE_PROFILE_H_
#define HARMONY_PLANNER_SEARCH_TESTING_FAKE_PROFILE_H_

#include <cstdint>

#include "proto/plan.pb.h"

namespace harmony::planner::testing {

struct FakeProfileOptions {
  int layers = 4;
  uint64_t parameter_bytes = 1 << 20;     // Per vLayer.
  uint64_t activation_bytes = 1 << 10;    // Per sample, in and out.
  double forward_s_per_sample = 1e-3;     // Per vLayer.
  double backward_factor = 2.0;           // Backward = factor x forward.
  double update_s = 1e-3;                 // Per vLayer.
  int max_microbatch = 64;                // Profiled 1, 2, 4, ... up to this.
  uint64_t device_memory = 1ull << 30;
  double bandwidth = 1e9;                 // Every link, bytes per second.
  // Layer `skip_from`'s output is also read by the last vLayer (a residual
  // or mask crossing several vLayers); -1 for a plain chain.
  int skip_from = -1;
  // Backward peaks measured as an embedding table's are (with saved bytes
  // and a task's first microbatch measured): autograd makes a fresh dense
  // gradient beside the accumulated one, so backward = weights + 2 x
  // gradients + 4 x activations, and a first microbatch's = weights +
  // gradients + 4 x activations; saved = 1 x activations.
  bool dense_fresh_gradients = false;
};

// A chain of identical vLayers (plus the optional skip). Peaks: forward =
// weights + 3 x activations; backward = weights + gradients + 4 x
// activations. Optimizer state = gradients (SGD with momentum).
proto::ProfileFile MakeFakeProfile(const FakeProfileOptions& options);

}  // namespace harmony::planner::testing

#endif  // HARMONY_PLANNER_SEARCH_TESTING_FAKE_PROFILE_H_
