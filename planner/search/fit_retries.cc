#include "planner/search/fit_retries.h"

#include <algorithm>
#include <utility>

#include "planner/search/prefetch_choice.h"

namespace harmony::planner {
namespace {

// Whether dropping the prefetch could bring `sim`'s peak within the
// devices: it frees at most the largest pack's weights.
bool CouldFitSingleBuffered(const CostModel& model, const Config& c, const SimResult& sim) {
  uint64_t largest = 0;
  for (const Packing* packs : {&c.forward_packs, &c.backward_packs}) {
    for (const PackRange& p : *packs) {
      largest = std::max(largest, model.WeightBytes(p.begin, p.end));
    }
  }
  uint64_t peak = 0;
  for (uint64_t p : sim.device_peak) peak = std::max(peak, p);
  return peak <= c.device_memory + largest;
}

// The backward packs of `c` worth summing on the host (Config::host_sums):
// in Harmony's vPP, those run over several microbatches whose backward with
// the gradients accumulated on the device needs more than half the device
// (with the next pack's weights prefetched beside it, the likely reason a
// config does not fit) and less without. Empty when there are none.
std::vector<bool> HostSumsFor(const CostModel& model, const Config& c) {
  if (c.mode != Mode::kVpp || c.schedule != Schedule::kHarmony) return {};
  std::vector<bool> sums(c.backward_packs.size(), false);
  bool any = false;
  for (size_t p = 0; p < c.backward_packs.size(); ++p) {
    const int u = c.BackwardMicrobatch(static_cast<int>(p));
    if (c.minibatch <= u) continue;
    const PackRange& r = c.backward_packs[p];
    const uint64_t device = model.BackwardMemory(r.begin, r.end, u);
    const uint64_t host = model.BackwardMemory(r.begin, r.end, u, true);
    sums[p] = host < device && device > c.device_memory / 2;
    any = any || sums[p];
  }
  if (!any) return {};
  return sums;
}

}  // namespace

void FitRetries::AddFewerAhead(const Candidate& cand) {
  if (!cand.graph.ok() || !cand.sim.ok() || cand.sim->fits) return;
  const Config& c = cand.config;
  if (c.schedule != Schedule::kHarmony || c.inputs_ahead != 0) return;
  uint64_t peak = 0;
  for (uint64_t p : cand.sim->device_peak) peak = std::max(peak, p);
  for (int a = plan::kInputsAhead - 1; a >= plan::kFewerInputsAhead; --a) {
    const uint64_t freed =
        static_cast<uint64_t>(plan::kInputsAhead - a) * cand.sim->largest_host_input;
    if (peak > c.device_memory + freed) continue;
    fewer_ahead.push_back(c);
    fewer_ahead.back().inputs_ahead = a;
  }
}

void FitRetries::Add(const CostModel& model, int minibatch, int num_devices, int waves,
                     const Candidate& cand) {
  if (!cand.graph.ok() || !cand.sim.ok() || cand.sim->fits) return;
  const Config& c = cand.config;
  if (c.schedule == Schedule::kHarmony && c.host_outputs_pending == 0 &&
      cand.sim->host_outputs_pending >= plan::kHostOutputsPending) {
    bounded.push_back(c);
    bounded.back().host_outputs_pending = plan::kHostOutputsPending;
  }
  AddFewerAhead(cand);
  if (waves == 0 && c.mode == Mode::kVdp && c.local_activations && c.waves == 1 &&
      c.schedule == Schedule::kHarmony) {
    for (int w = 2; w <= 16 && minibatch / w >= 2 * num_devices * c.forward_microbatch; w *= 2) {
      waved.push_back(c);
      waved.back().waves = w;
    }
  }
  if (c.prefetch && c.late_forward.empty() && c.late_backward.empty() &&
      CouldFitSingleBuffered(model, c, *cand.sim)) {
    for (Config& v : LateVariants(c)) single.push_back(std::move(v));
  }
  if (c.host_sums.empty()) {
    std::vector<bool> sums = HostSumsFor(model, c);
    if (!sums.empty()) {
      summed.push_back(c);
      summed.back().host_sums = std::move(sums);
    }
  }
}

}  // namespace harmony::planner
