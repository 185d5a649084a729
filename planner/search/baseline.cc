// The baseline schedules (on-demand swapping, GPipe, data parallel with
// swapping) at one microbatch size, as their users would plan them
// (search.h's PlanBaseline).

#include "absl/strings/str_cat.h"
#include "planner/search/packing.h"
#include "planner/search/search.h"

namespace harmony::planner {

absl::StatusOr<SearchResult> PlanBaseline(const CostModel& model, const SearchOptions& o,
                                          int microbatch) {
  if (o.minibatch < 1) return absl::InvalidArgumentError("the minibatch must be at least 1");
  Config c;
  c.schedule = o.schedule;
  c.mode = o.schedule == Schedule::kGpipe ? Mode::kVpp : Mode::kVdp;
  c.num_devices = o.num_devices;
  c.device_memory = o.device_memory;
  c.minibatch = o.minibatch;
  c.forward_microbatch = c.backward_microbatch = std::max(1, microbatch);
  if (o.schedule != Schedule::kOndemand) {
    PackRequest r;
    r.begin = 0;
    r.end = model.num_layers();
    r.microbatch = c.backward_microbatch;
    r.phase = PackPhase::kBackward;
    r.budget = o.device_memory / 2;
    r.swap_bandwidth = model.bandwidths().host_all_devices / o.num_devices;
    auto pack = [&] {
      return o.schedule == Schedule::kGpipe ? BalancedTimePacks(model, r)
                                            : GreedyPacks(model, r);
    };
    absl::StatusOr<Packing> packs = pack();
    if (absl::IsResourceExhausted(packs.status())) {
      r.budget = o.device_memory;  // No room to prefetch, then.
      packs = pack();
    }
    if (!packs.ok()) return packs.status();
    if (o.schedule == Schedule::kGpipe &&
        static_cast<int>(packs->size()) < std::min(o.num_devices, model.num_layers())) {
      // One stage per device at least: split by time into that many.
      r.budget = model.BackwardMemory(0, model.num_layers(), r.microbatch);
      Packing even;
      const int stages = std::min(o.num_devices, model.num_layers());
      double total = 0;  // Of the vLayers' own times, as `done` adds them.
      for (int l = 0; l < model.num_layers(); ++l) {
        total += model.BackwardSeconds(l, l + 1, r.microbatch);
      }
      int begin = 0;
      double done = 0;
      // Cut after vLayer l when its share of the time is done, or when
      // just enough vLayers are left for the stages still to open (one
      // each); the last stage keeps at least the last vLayer.
      for (int l = 0; l + 1 < model.num_layers(); ++l) {
        done += model.BackwardSeconds(l, l + 1, r.microbatch);
        const int need = stages - static_cast<int>(even.size()) - 1;
        if (need <= 0) break;
        const int left = model.num_layers() - l - 1;
        if (done >= total * (even.size() + 1) / stages || left <= need) {
          even.push_back({begin, l + 1});
          begin = l + 1;
        }
      }
      even.push_back({begin, model.num_layers()});
      *packs = even;
    }
    c.backward_packs = *packs;
    c.forward_packs.assign(packs->begin(), packs->end() - 1);
  }
  absl::StatusOr<TaskGraph> g = BuildTaskGraph(model, c);
  if (!g.ok()) return g.status();
  absl::StatusOr<SimResult> sim = Simulate(model, *g);
  if (!sim.ok()) return sim.status();
  SearchResult result;
  result.graph = *std::move(g);
  result.sim = *std::move(sim);
  result.candidates = 1;
  result.feasible = result.sim.fits ? 1 : 0;
  return result;
}

}  // namespace harmony::planner
