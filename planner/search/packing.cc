#include "planner/search/packing.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/units.h"

namespace harmony::planner {
namespace {

uint64_t Memory(const CostModel& m, const PackRequest& r, int b, int e) {
  return r.phase == PackPhase::kForward ? m.ForwardMemory(b, e, r.microbatch)
                                        : m.BackwardMemory(b, e, r.microbatch, r.host_sums);
}

absl::Status CheckRange(const CostModel& m, const PackRequest& r) {
  if (r.begin < 0 || r.end > m.num_layers() || r.begin >= r.end) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pack range [", r.begin, ", ", r.end, ") is not within the ",
        m.num_layers(), " vLayers"));
  }
  for (int l = r.begin; l < r.end; ++l) {
    const uint64_t need = Memory(m, r, l, l + 1);
    if (need > r.budget) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "vLayer ", l, " alone needs ", common::FormatBytes(need), " for its ",
          r.phase == PackPhase::kForward ? "forward" : "backward",
          " at microbatch ", r.microbatch, ", more than the ",
          common::FormatBytes(r.budget), " a device has for it"));
    }
  }
  return absl::OkStatus();
}

// Splits [r.begin, r.end) into `parts` packs of about equal `weight`
// (prefix sums, cutting where the running sum crosses each share).
Packing SplitEvenly(const PackRequest& r, const std::vector<double>& weight,
                    int parts) {
  std::vector<double> prefix(weight.size() + 1, 0.0);
  for (size_t i = 0; i < weight.size(); ++i) prefix[i + 1] = prefix[i] + weight[i];
  const double total = prefix.back();
  Packing packing;
  int begin = 0;
  const int n = static_cast<int>(weight.size());
  for (int p = 1; p <= parts && begin < n; ++p) {
    int end = n;
    if (p < parts) {
      const double target = total * p / parts;
      end = static_cast<int>(std::lower_bound(prefix.begin(), prefix.end(), target) -
                             prefix.begin());
      // Round to the nearer boundary, keeping at least one vLayer per pack
      // and leaving one for each remaining pack.
      if (end > begin + 1 && target - prefix[end - 1] < prefix[end] - target) --end;
      end = std::max(end, begin + 1);
      end = std::min(end, n - (parts - p));
    }
    packing.push_back({r.begin + begin, r.begin + end});
    begin = end;
  }
  return packing;
}

bool AllFit(const CostModel& m, const PackRequest& r, const Packing& packing) {
  for (const PackRange& p : packing) {
    if (Memory(m, r, p.begin, p.end) > r.budget) return false;
  }
  return true;
}

// Balanced split by `weight` with as few packs as fit.
absl::StatusOr<Packing> Balanced(const CostModel& m, const PackRequest& r,
                                 const std::vector<double>& weight) {
  absl::Status ok = CheckRange(m, r);
  if (!ok.ok()) return ok;
  const int n = r.end - r.begin;
  const double whole = static_cast<double>(Memory(m, r, r.begin, r.end));
  int parts = std::max(1, static_cast<int>(std::ceil(whole / r.budget)));
  for (; parts <= n; ++parts) {
    Packing packing = SplitEvenly(r, weight, parts);
    if (AllFit(m, r, packing)) return packing;
  }
  Packing singles;
  for (int l = r.begin; l < r.end; ++l) singles.push_back({l, l + 1});
  return singles;
}

}  // namespace

double PackCost(const CostModel& m, const PackRequest& r, int b, int e) {
  const int u = r.microbatch;
  const double compute = (r.phase == PackPhase::kForward ? m.ForwardSeconds(b, e, u)
                                                         : m.BackwardSeconds(b, e, u)) *
                         r.microbatches;
  uint64_t swap_bytes = m.WeightBytes(b, e);
  if (r.phase == PackPhase::kBackward) swap_bytes += m.GradientBytes(b, e);
  const double swap = static_cast<double>(swap_bytes) / r.swap_bandwidth;
  const double activations =
      static_cast<double>(m.PackInputBytes(b, e, u) + m.PackOutputBytes(b, e, u)) *
      r.microbatches / r.swap_bandwidth;
  return std::max(compute, swap) + activations;
}

absl::StatusOr<Packing> GreedyPacks(const CostModel& m, const PackRequest& r) {
  absl::Status ok = CheckRange(m, r);
  if (!ok.ok()) return ok;
  Packing packing;
  int begin = r.begin;
  while (begin < r.end) {
    int end = begin + 1;
    while (end < r.end && Memory(m, r, begin, end + 1) <= r.budget) ++end;
    packing.push_back({begin, end});
    begin = end;
  }
  return packing;
}

absl::StatusOr<Packing> BalancedMemoryPacks(const CostModel& m, const PackRequest& r) {
  std::vector<double> weight;
  for (int l = r.begin; l < r.end && l < m.num_layers(); ++l) {
    weight.push_back(static_cast<double>(Memory(m, r, l, l + 1)));
  }
  return Balanced(m, r, weight);
}

absl::StatusOr<Packing> BalancedTimePacks(const CostModel& m, const PackRequest& r) {
  std::vector<double> weight;
  for (int l = r.begin; l < r.end && l < m.num_layers(); ++l) {
    weight.push_back(r.phase == PackPhase::kForward
                         ? m.ForwardSeconds(l, l + 1, r.microbatch)
                         : m.BackwardSeconds(l, l + 1, r.microbatch));
  }
  return Balanced(m, r, weight);
}

absl::StatusOr<Packing> EvenTimePacks(const CostModel& m, const PackRequest& r, int parts) {
  absl::Status ok = CheckRange(m, r);
  if (!ok.ok()) return ok;
  if (parts < 1 || parts > r.end - r.begin) {
    return absl::InvalidArgumentError(absl::StrCat(
        parts, " packs of ", r.end - r.begin, " vLayers"));
  }
  std::vector<double> weight;
  for (int l = r.begin; l < r.end; ++l) {
    weight.push_back(r.phase == PackPhase::kForward ? m.ForwardSeconds(l, l + 1, r.microbatch)
                                                    : m.BackwardSeconds(l, l + 1, r.microbatch));
  }
  Packing packing = SplitEvenly(r, weight, parts);
  if (!AllFit(m, r, packing)) {
    return absl::ResourceExhaustedError(absl::StrCat(parts, " even packs do not fit"));
  }
  return packing;
}

absl::StatusOr<Packing> OptimalPacks(const CostModel& m, const PackRequest& r) {
  absl::Status ok = CheckRange(m, r);
  if (!ok.ok()) return ok;
  const int n = r.end - r.begin;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[i]: (largest pack cost, sum of costs) over packings of the first i
  // vLayers; from[i]: where the last pack starts.
  // (With minimize_sum the pair is (sum, largest).)
  std::vector<std::pair<double, double>> best(n + 1, {kInf, kInf});
  std::vector<int> from(n + 1, -1);
  best[0] = {0.0, 0.0};
  for (int b = 0; b < n; ++b) {
    if (best[b].first == kInf) continue;
    for (int e = b + 1; e <= n; ++e) {
      // Memory grows with the pack: stop at the first that does not fit.
      if (Memory(m, r, r.begin + b, r.begin + e) > r.budget) break;
      const double c = PackCost(m, r, r.begin + b, r.begin + e);
      std::pair<double, double> v{std::max(best[b].first, c), best[b].second + c};
      if (r.minimize_sum) std::swap(v.first, v.second);
      if (v < best[e]) {
        best[e] = v;
        from[e] = b;
      }
    }
  }
  Packing packing;
  for (int e = n; e > 0; e = from[e]) packing.push_back({r.begin + from[e], r.begin + e});
  std::reverse(packing.begin(), packing.end());
  return packing;
}

std::string PackingString(const Packing& packing) {
  std::string out;
  for (const PackRange& p : packing) absl::StrAppend(&out, "[", p.begin, "-", p.end - 1, "]");
  return out;
}

}  // namespace harmony::planner
