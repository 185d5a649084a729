#include "planner/search/candidates.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <utility>

namespace harmony::planner {

std::vector<Candidate> SimulateAll(const CostModel& model, std::vector<Config> configs,
                                   int threads) {
  std::vector<Candidate> out(configs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < out.size(); i = next++) {
      out[i].config = std::move(configs[i]);
      out[i].graph = BuildTaskGraph(model, out[i].config);
      if (out[i].graph.ok()) {
        out[i].sim = Simulate(model, *out[i].graph);
        // Tens of MiB for a model of many vLayers at a small microbatch, and
        // a search simulates thousands: only the winner's is rebuilt.
        out[i].graph->tasks = {};
      }
    }
  };
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(out.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return out;
}

std::optional<Candidate> ChooseByFlips(const CostModel& model, const Config& start,
                                       double start_s, int choices,
                                       const std::function<void(Config&, int)>& flip,
                                       int threads, int* simulated, int max_rounds) {
  std::optional<Candidate> best;
  Config current = start;
  double current_s = start_s;
  auto flipped = [&](Config c, const std::vector<int>& is) {
    for (int i : is) flip(c, i);
    return c;
  };
  for (int round = 0; round < max_rounds && choices > 0; ++round) {
    std::vector<Config> configs;
    for (int i = 0; i < choices; ++i) configs.push_back(flipped(current, {i}));
    std::vector<Candidate> done = SimulateAll(model, std::move(configs), threads);
    *simulated += static_cast<int>(done.size());
    const double gain = current_s * (1 - 1e-3);
    std::vector<int> faster;  // Choices, fastest first.
    for (int i = 0; i < choices; ++i) {
      if (done[i].fits() && done[i].sim->iteration_s < gain) faster.push_back(i);
    }
    if (faster.empty()) break;
    std::stable_sort(faster.begin(), faster.end(), [&](int a, int b) {
      return done[a].sim->iteration_s < done[b].sim->iteration_s;
    });
    Candidate next = std::move(done[faster.front()]);
    if (faster.size() > 1) {
      std::vector<Candidate> together = SimulateAll(model, {flipped(current, faster)}, 1);
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
