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
      if (out[i].graph.ok()) out[i].sim = Simulate(model, *out[i].graph);
    }
  };
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(out.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return out;
}

}  // namespace harmony::planner
