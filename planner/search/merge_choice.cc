#include "planner/search/merge_choice.h"

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

namespace harmony::planner {
namespace {

bool ForwardIsBackward(const Config& c) {
  return !c.backward_packs.empty() &&
         c.forward_packs == Packing(c.backward_packs.begin(), c.backward_packs.end() - 1);
}

// Joins entries q and q + 1 of a per-pack vector (empty: none set) into q.
template <typename T, typename Join>
void JoinAt(std::vector<T>& v, size_t packs, int q, Join join) {
  if (v.empty()) return;
  v.resize(packs, T{});
  v[q] = join(v[q], v[q + 1]);
  v.erase(v.begin() + q + 1);
}

void JoinRanges(Packing& packs, int q) {
  packs[q].end = packs[q + 1].end;
  packs.erase(packs.begin() + q + 1);
}

// One move: packs q and q + 1 of `side` merged, and `pairs` - 1 more pairs
// after them (q + 2 with q + 3, ...).
struct Merge {
  MergeSide side;
  int q;
  int pairs = 1;
};

// Whether two single merges touch a common pack.
bool Overlap(const Merge& a, const Merge& b) {
  return a.side == b.side && std::abs(a.q - b.q) <= 1;
}

// Runs of at least 4 alike packs (as many vLayers, the same weight bytes)
// merged in pairs: one pair among singles makes the schedule uneven and
// is rarely faster alone, where every pair together is (zoo vgg's last
// stage of 32 convolutions, one per pack: one pair 0.2% slower, all 16
// pairs 3.4% faster).
void AddRuns(const CostModel& model, const Packing& packs, int merges_end, MergeSide side,
             std::vector<Merge>& out) {
  auto alike = [&](const PackRange& a, const PackRange& b) {
    return a.end - a.begin == b.end - b.begin &&
           model.WeightBytes(a.begin, a.end) == model.WeightBytes(b.begin, b.end);
  };
  for (int q = 0; q < merges_end;) {
    int end = q + 1;  // One past the run's last pack.
    while (end < merges_end + 1 && alike(packs[q], packs[end])) ++end;
    if (end - q >= 4) out.push_back({side, q, (end - q) / 2});
    q = end;
  }
}

std::vector<Merge> Merges(const CostModel& model, const Config& c) {
  std::vector<Merge> out;
  const int backward = static_cast<int>(c.backward_packs.size()) - 1;
  for (int q = 0; q < backward; ++q) out.push_back({MergeSide::kBackward, q});
  // (Runs stop short of the fused pack.)
  AddRuns(model, c.backward_packs, backward - 1, MergeSide::kBackward, out);
  if (!ForwardIsBackward(c)) {
    const int forward = static_cast<int>(c.forward_packs.size()) - 1;
    for (int q = 0; q < forward; ++q) out.push_back({MergeSide::kForward, q});
    AddRuns(model, c.forward_packs, forward, MergeSide::kForward, out);
  }
  return out;
}

}  // namespace

std::optional<Config> MergePacks(const Config& c, MergeSide side, int q) {
  const int backward = static_cast<int>(c.backward_packs.size());
  const int forward = static_cast<int>(c.forward_packs.size());
  Config m = c;
  if (side == MergeSide::kForward) {
    if (q < 0 || q + 1 >= forward) return std::nullopt;
    JoinRanges(m.forward_packs, q);
    JoinAt(m.late_forward, forward, q, [](bool a, bool b) { return a || b; });
    // A pack keeps only what one forward pack computed: those that lay in
    // either half still do, in the merged one.
    return m;
  }
  if (q < 0 || q + 1 >= backward) return std::nullopt;
  if (q + 2 == backward) {
    // Into the fused pack, which computes its own forward: the forward pack
    // that computed pack q goes.
    if (c.forward_packs.empty() || !(c.forward_packs.back() == c.backward_packs[q])) {
      return std::nullopt;
    }
    m.forward_packs.pop_back();
    if (!m.late_forward.empty()) m.late_forward.resize(m.forward_packs.size());
  }
  const bool both = q + 2 < backward && ForwardIsBackward(c);
  JoinRanges(m.backward_packs, q);
  if (!m.backward_pack_microbatch.empty()) {
    const int u = std::min(c.BackwardMicrobatch(q), c.BackwardMicrobatch(q + 1));
    JoinAt(m.backward_pack_microbatch, backward, q, [](int, int) { return 0; });
    m.backward_pack_microbatch[q] = u == c.backward_microbatch ? 0 : u;
  }
  auto either = [](bool a, bool b) { return a || b; };
  JoinAt(m.late_backward, backward, q, either);
  JoinAt(m.host_sums, backward, q, either);
  JoinAt(m.keep, backward, q, [both](bool a, bool b) { return both && a && b; });
  if (both) {
    JoinRanges(m.forward_packs, q);
    JoinAt(m.late_forward, forward, q, either);
  }
  return m;
}

std::optional<Candidate> ChooseMergedPacks(const CostModel& model, const Config& start,
                                           double start_s, int threads, int* simulated,
                                           int max_rounds) {
  if (start.schedule != Schedule::kHarmony) return std::nullopt;
  std::optional<Candidate> best;
  Config current = start;
  double current_s = start_s;
  // Applies moves that share no pack, highest pack first so that the
  // lower ones keep their indices.
  auto merged = [](Config c, std::vector<Merge> moves) -> std::optional<Config> {
    std::vector<Merge> singles;
    for (const Merge& m : moves) {
      for (int k = 0; k < m.pairs; ++k) singles.push_back({m.side, m.q + 2 * k});
    }
    std::sort(singles.begin(), singles.end(),
              [](const Merge& a, const Merge& b) { return a.q > b.q; });
    for (const Merge& m : singles) {
      std::optional<Config> next = MergePacks(c, m.side, m.q);
      if (!next) return std::nullopt;
      c = *std::move(next);
    }
    return c;
  };
  for (int round = 0; round < max_rounds; ++round) {
    std::vector<Merge> merges;  // Those that apply.
    std::vector<Config> configs;
    for (const Merge& m : Merges(model, current)) {
      std::optional<Config> c = merged(current, {m});
      if (!c) continue;
      merges.push_back(m);
      configs.push_back(*std::move(c));
    }
    if (merges.empty()) break;
    std::vector<Candidate> done = SimulateAll(model, std::move(configs), threads);
    *simulated += static_cast<int>(done.size());
    const double gain = current_s * (1 - 1e-3);
    std::vector<int> faster;  // Merges, fastest first.
    for (size_t i = 0; i < done.size(); ++i) {
      if (done[i].fits() && done[i].sim->iteration_s < gain) faster.push_back(static_cast<int>(i));
    }
    if (faster.empty()) break;
    std::stable_sort(faster.begin(), faster.end(), [&](int a, int b) {
      return done[a].sim->iteration_s < done[b].sim->iteration_s;
    });
    Candidate next = std::move(done[faster.front()]);
    std::vector<Merge> apart;  // Faster single merges sharing no pack, fastest first.
    for (int i : faster) {
      if (merges[i].pairs > 1) continue;
      const bool free = std::none_of(apart.begin(), apart.end(),
                                     [&](const Merge& a) { return Overlap(a, merges[i]); });
      if (free) apart.push_back(merges[i]);
    }
    if (apart.size() > 1) {
      std::optional<Config> together = merged(current, apart);
      if (together) {
        std::vector<Candidate> t = SimulateAll(model, {*std::move(together)}, 1);
        ++*simulated;
        if (t[0].fits() && t[0].sim->iteration_s < next.sim->iteration_s) next = std::move(t[0]);
      }
    }
    current = next.config;
    current_s = next.sim->iteration_s;
    best = std::move(next);
  }
  return best;
}

}  // namespace harmony::planner
