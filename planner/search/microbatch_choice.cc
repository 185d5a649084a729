#include "planner/search/microbatch_choice.h"

#include <algorithm>
#include <limits>

namespace harmony::planner {
namespace {

// U_b, 2 U_b, 4 U_b, ... below `largest`, and `largest`.
std::vector<int> SizesFrom(int ub, int largest) {
  std::vector<int> out;
  for (int u = ub; u < largest; u *= 2) out.push_back(u);
  out.push_back(std::max(ub, largest));
  return out;
}

// `at(size)` over `samples` in microbatches of `u` (the last may be smaller).
template <typename F>
double Over(int samples, int u, const F& at) {
  const int full = samples / u, rest = samples % u;
  return full * at(u) + (rest > 0 ? at(rest) : 0.0);
}

}  // namespace

bool PackMicrobatchesAllowed(const CostModel& model, const Config& c) {
  return c.schedule == Schedule::kHarmony && c.forward_microbatch > c.backward_microbatch &&
         !model.needs_equal_microbatches();
}

std::optional<Config> LargerPackMicrobatches(const CostModel& model, const Config& c,
                                             bool beside_prefetch) {
  if (!PackMicrobatchesAllowed(model, c)) return std::nullopt;
  const std::vector<int> sizes = SizesFrom(c.backward_microbatch, c.forward_microbatch);
  Config out = c;
  out.backward_pack_microbatch.assign(c.backward_packs.size(), c.backward_microbatch);
  bool grew = false;
  for (size_t q = 0; q < c.backward_packs.size(); ++q) {
    const PackRange& p = c.backward_packs[q];
    // Prefetched beside it: the next backward task's weights on its
    // device, the pack before (vDP) or num_devices before (vPP).
    uint64_t prefetch = 0;
    for (int next = static_cast<int>(q) - 1; beside_prefetch && next >= 0 &&
                                             next >= static_cast<int>(q) - std::max(1, c.num_devices);
         --next) {
      const PackRange& n = c.backward_packs[next];
      prefetch = std::max(prefetch, model.WeightBytes(n.begin, n.end));
    }
    for (int u : sizes) {
      if (u <= out.backward_pack_microbatch[q]) continue;
      if (model.BackwardMemory(p.begin, p.end, u, c.HostSums(static_cast<int>(q))) + prefetch >
          c.device_memory) {
        break;
      }
      out.backward_pack_microbatch[q] = u;
      grew = true;
    }
  }
  if (!grew) return std::nullopt;
  return out;
}

int LargestFittingBackwardMicrobatch(const CostModel& model, const std::vector<int>& sizes,
                                     uint64_t device_memory) {
  int best = 0;
  for (int u : sizes) {
    bool fits = true;
    for (int l = 0; fits && l < model.num_layers(); ++l) {
      fits = model.BackwardMemory(l, l + 1, u) <= device_memory;
    }
    if (fits) best = std::max(best, u);
  }
  return best;
}

double BackwardSecondsLowerBound(const CostModel& model, int samples, int ub, int largest) {
  double seconds = 0;
  const std::vector<int> sizes = SizesFrom(ub, std::max(ub, largest));
  for (int l = 0; l < model.num_layers(); ++l) {
    double fastest = std::numeric_limits<double>::infinity();
    for (int u : sizes) {
      fastest = std::min(fastest, Over(samples, u, [&](int size) {
                           return model.LeastBackwardSeconds(l, size);
                         }));
    }
    seconds += fastest;
  }
  return seconds;
}

}  // namespace harmony::planner
