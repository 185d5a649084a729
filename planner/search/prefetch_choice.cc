#include "planner/search/prefetch_choice.h"

#include <algorithm>
#include <utility>

namespace harmony::planner {
namespace {

// `c` with every pack late, prefetching on: the same task graph as `c`
// single-buffered, in the form per-pack flips start from.
Config AllLate(Config c) {
  if (!c.prefetch) {
    c.prefetch = true;
    c.late_forward.assign(c.forward_packs.size(), true);
    c.late_backward.assign(c.backward_packs.size(), true);
  }
  c.late_forward.resize(c.forward_packs.size(), false);
  c.late_backward.resize(c.backward_packs.size(), false);
  return c;
}

}  // namespace

bool AnyLate(const Config& c) {
  auto any = [](const std::vector<bool>& v) {
    return std::find(v.begin(), v.end(), true) != v.end();
  };
  return !c.prefetch || any(c.late_forward) || any(c.late_backward);
}

std::vector<Config> LateVariants(const Config& c) {
  std::vector<Config> out;
  Config single = c;
  single.prefetch = false;
  single.late_forward.clear();
  single.late_backward.clear();
  out.push_back(single);
  if (!c.forward_packs.empty() && !c.backward_packs.empty()) {
    Config late_forward = c;
    late_forward.late_forward.assign(c.forward_packs.size(), true);
    late_forward.late_backward.clear();
    out.push_back(std::move(late_forward));
    Config late_backward = c;
    late_backward.late_forward.clear();
    late_backward.late_backward.assign(c.backward_packs.size(), true);
    out.push_back(std::move(late_backward));
  }
  return out;
}

Config NormalizeLate(Config c) {
  if (!c.prefetch) {
    c.late_forward.clear();
    c.late_backward.clear();
    return c;
  }
  auto all = [](const std::vector<bool>& v, size_t n) {
    return v.size() == n && std::find(v.begin(), v.end(), false) == v.end();
  };
  auto none = [](const std::vector<bool>& v) {
    return std::find(v.begin(), v.end(), true) == v.end();
  };
  if (none(c.late_forward) && none(c.late_backward)) {
    c.late_forward.clear();
    c.late_backward.clear();
  } else if (all(c.late_forward, c.forward_packs.size()) &&
             all(c.late_backward, c.backward_packs.size())) {
    c.prefetch = false;
    c.late_forward.clear();
    c.late_backward.clear();
  }
  return c;
}

std::optional<Candidate> ChoosePrefetchedPacks(const CostModel& model, const Config& start,
                                               double start_s, int threads, int* simulated,
                                               int max_rounds) {
  if (!AnyLate(start)) return std::nullopt;
  const Config from = AllLate(start);
  const int forward = static_cast<int>(from.forward_packs.size());
  const int choices = forward + static_cast<int>(from.backward_packs.size());
  std::optional<Candidate> best = ChooseByFlips(
      model, from, start_s, choices,
      [forward](Config& c, int i) {
        std::vector<bool>& late = i < forward ? c.late_forward : c.late_backward;
        const int p = i < forward ? i : i - forward;
        late[p] = !late[p];
      },
      threads, simulated, max_rounds);
  if (!best) return best;
  // In its plainest form: the same task graph.
  std::vector<Candidate> plain = SimulateAll(model, {NormalizeLate(best->config)}, 1);
  ++*simulated;
  return std::move(plain[0]);
}

}  // namespace harmony::planner
