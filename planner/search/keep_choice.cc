#include "planner/search/keep_choice.h"

#include <algorithm>
#include <utility>

namespace harmony::planner {

std::vector<int> KeepablePacks(const CostModel& model, const Config& c) {
  std::vector<int> out;
  if (c.schedule != Schedule::kHarmony || c.forward_microbatch != c.backward_microbatch ||
      !model.measured_kept()) {
    return out;
  }
  for (size_t q = 0; q + 1 < c.backward_packs.size(); ++q) {
    if (KeepSource(c.forward_packs, c.backward_packs[q]) >= 0) out.push_back(static_cast<int>(q));
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
  std::optional<Candidate> best;
  if (packs.empty()) return best;
  Config current = start;
  current.keep.resize(start.backward_packs.size(), false);
  double current_s = start_s;
  auto flipped = [](Config c, const std::vector<int>& qs) {
    for (int q : qs) c.keep[q] = !c.keep[q];
    return c;
  };
  for (int round = 0; round < max_rounds; ++round) {
    std::vector<Config> configs;
    for (int q : packs) configs.push_back(flipped(current, {q}));
    std::vector<Candidate> done = SimulateAll(model, std::move(configs), threads);
    *simulated += static_cast<int>(done.size());
    const double gain = current_s * (1 - 1e-3);
    std::vector<int> faster;  // Indices into `packs`, fastest first.
    for (size_t i = 0; i < done.size(); ++i) {
      if (done[i].fits() && done[i].sim->iteration_s < gain) faster.push_back(static_cast<int>(i));
    }
    if (faster.empty()) break;
    std::stable_sort(faster.begin(), faster.end(), [&](int a, int b) {
      return done[a].sim->iteration_s < done[b].sim->iteration_s;
    });
    Candidate next = std::move(done[faster.front()]);
    if (faster.size() > 1) {
      std::vector<int> qs;
      for (int i : faster) qs.push_back(packs[i]);
      std::vector<Candidate> together =
          SimulateAll(model, {flipped(current, qs)}, 1);
      ++*simulated;
      if (together[0].fits() && together[0].sim->iteration_s < next.sim->iteration_s) {
        next = std::move(together[0]);
      }
    }
    current = next.config;
    current_s = next.sim->iteration_s;
    best = std::move(next);
  }
  return best;
}

}  // namespace harmony::planner
