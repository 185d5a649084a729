#include "planner/search/keep_choice.h"

#include <algorithm>
#include <utility>

namespace harmony::planner {

std::vector<int> KeepablePacks(const CostModel& model, const Config& c) {
  std::vector<int> out;
  if (c.schedule != Schedule::kHarmony || !model.measured_kept()) return out;
  for (size_t q = 0; q + 1 < c.backward_packs.size(); ++q) {
    if (c.BackwardMicrobatch(static_cast<int>(q)) == c.forward_microbatch &&
        KeepSource(c.forward_packs, c.backward_packs[q]) >= 0) {
      out.push_back(static_cast<int>(q));
    }
  }
  return out;
}

std::vector<Config> KeepVariants(const CostModel& model, const Config& c, KeepActivations keep) {
  if (keep == KeepActivations::kNone) return {c};
  const std::vector<int> packs = KeepablePacks(model, c);
  if (packs.empty()) return {c};
  Config all = c;
  all.keep.assign(c.backward_packs.size(), false);
  for (int q : packs) all.keep[q] = true;
  if (keep == KeepActivations::kAll) return {all};
  return {c, all};
}

std::optional<Candidate> ChooseKeptPacks(const CostModel& model, const Config& start,
                                         double start_s, int threads, int* simulated,
                                         int max_rounds) {
  const std::vector<int> packs = KeepablePacks(model, start);
  if (packs.empty()) return std::nullopt;
  Config current = start;
  current.keep.resize(start.backward_packs.size(), false);
  return ChooseByFlips(
      model, current, start_s, static_cast<int>(packs.size()),
      [&](Config& c, int i) { c.keep[packs[i]] = !c.keep[packs[i]]; }, threads, simulated,
      max_rounds);
}

}  // namespace harmony::planner
