// Choosing a decomposition's cut points (decomposer_cuts.h).

#include "common/decomposer_cuts.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace harmony::common::decomposer_internal {
namespace {

struct Unit {
  int begin = 0;
  int end = 0;
  int depth = 0;          // Frames shared by all its call nodes.
  bool splittable = true;
};

int64_t Weight(const std::vector<int64_t>& elements, int begin, int end) {
  int64_t w = 0;
  for (int i = begin; i < end; ++i) w += elements[i] + 64;
  return w;
}

// Groups [begin, end) by the first `depth` frames: consecutive nodes from
// the same module call form one group; nodes not inside a call at that depth
// (glue) are groups of their own. Then parameter-free groups are merged into
// a neighbour, placing the boundary where the fewest tensors are live.
std::vector<Unit> SplitAtDepth(const PureGraph& pure,
                               const std::vector<bool>& reads_params, int begin,
                               int end, int depth) {
  auto key = [&](int i) -> std::string {
    const auto& f = pure.frames[i];
    if (static_cast<int>(f.size()) < depth) return "";
    return absl::StrJoin(f.begin(), f.begin() + depth, "/");
  };
  std::vector<Unit> groups;
  for (int i = begin; i < end; ++i) {
    const std::string k = key(i);
    if (!groups.empty() && !k.empty() && key(groups.back().begin) == k) {
      groups.back().end = i + 1;
    } else {
      groups.push_back(Unit{i, i + 1, depth, true});
    }
  }
  auto has_params = [&](const Unit& u) {
    for (int i = u.begin; i < u.end; ++i) {
      if (reads_params[i]) return true;
    }
    return false;
  };
  // Keep the groups with parameters; for each run of parameter-free groups
  // between two of them, cut at the boundary with the fewest live tensors
  // (the latest one on ties, so glue goes with the code before it).
  std::vector<int> anchors;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (has_params(groups[g])) anchors.push_back(static_cast<int>(g));
  }
  if (anchors.size() <= 1) {
    // One block (or none) at this depth; a deeper split may still exist.
    return {Unit{begin, end, depth, true}};
  }
  std::vector<int> cuts{begin};
  for (size_t a = 0; a + 1 < anchors.size(); ++a) {
    int best = groups[anchors[a + 1]].begin;
    int best_live = pure.live_tensors[best];
    for (int g = anchors[a] + 1; g <= anchors[a + 1]; ++g) {
      const int p = groups[g].begin;
      if (pure.forbidden_cut[p]) continue;
      if (pure.live_tensors[p] <= best_live || pure.forbidden_cut[best]) {
        best = p;
        best_live = pure.live_tensors[p];
      }
    }
    if (!pure.forbidden_cut[best]) cuts.push_back(best);
  }
  std::vector<Unit> units;
  for (size_t c = 0; c < cuts.size(); ++c) {
    const int e = c + 1 < cuts.size() ? cuts[c + 1] : end;
    units.push_back(Unit{cuts[c], e, depth, true});
  }
  return units;
}

// `elements`: parameter elements first read by each node (for balancing);
// `reads_params`: whether a node reads any parameter (for grouping).
}  // namespace

std::vector<int> ChooseCuts(const PureGraph& pure,
                            const std::vector<int64_t>& elements,
                            const std::vector<int64_t>& bytes,
                            const std::vector<bool>& reads_params,
                            int granularity, uint64_t max_unit_bytes,
                            bool split_blocks) {
  const int count = static_cast<int>(pure.nodes.size());
  int64_t total = 0;
  for (int64_t e : elements) total += e;
  std::vector<Unit> units = SplitAtDepth(pure, reads_params, 0, count, 1);

  auto params_of = [&](const Unit& u) {
    int64_t p = 0;
    for (int i = u.begin; i < u.end; ++i) p += elements[i];
    return p;
  };
  // Split `units[i]` one level deeper; false when that changes nothing.
  auto split = [&](size_t i) {
    Unit u = units[i];
    int max_depth = 0;
    for (int n = u.begin; n < u.end; ++n) {
      max_depth = std::max(max_depth, static_cast<int>(pure.frames[n].size()));
    }
    for (int depth = u.depth + 1; depth <= max_depth + 1; ++depth) {
      std::vector<Unit> parts =
          SplitAtDepth(pure, reads_params, u.begin, u.end, depth);
      if (parts.size() > 1) {
        units.erase(units.begin() + i);
        units.insert(units.begin() + i, parts.begin(), parts.end());
        return true;
      }
    }
    units[i].splittable = false;
    return false;
  };

  // Open up any block that holds more than half of the parameters (a
  // top-level `encoder` or `layers` container).
  while (true) {
    size_t heaviest = 0;
    for (size_t i = 1; i < units.size(); ++i) {
      if (params_of(units[i]) > params_of(units[heaviest])) heaviest = i;
    }
    if (units.size() == 0 || !units[heaviest].splittable ||
        params_of(units[heaviest]) * 2 <= total || !split(heaviest)) {
      break;
    }
  }
  // Cut units whose weights exceed the limit along their own modules.
  if (max_unit_bytes > 0) {
    auto bytes_of = [&](const Unit& u) {
      uint64_t b = 0;
      for (int i = u.begin; i < u.end; ++i) b += static_cast<uint64_t>(bytes[i]);
      return b;
    };
    for (size_t i = 0; i < units.size();) {
      if (units[i].splittable && bytes_of(units[i]) > max_unit_bytes && split(i)) continue;
      ++i;
    }
  }
  if (split_blocks) {
    const size_t blocks = units.size();
    for (size_t b = 0, i = 0; b < blocks; ++b) {
      const size_t before = units.size();
      if (units[i].splittable) split(i);
      i += 1 + (units.size() - before);
    }
  }
  if (granularity > 0) {
    while (static_cast<int>(units.size()) < granularity) {
      int best = -1;
      for (size_t i = 0; i < units.size(); ++i) {
        if (!units[i].splittable) continue;
        if (best < 0 || Weight(elements, units[i].begin, units[i].end) >
                            Weight(elements, units[best].begin,
                                   units[best].end)) {
          best = static_cast<int>(i);
        }
      }
      if (best < 0) break;
      split(best);
    }
    while (static_cast<int>(units.size()) > granularity) {
      size_t best = 0;
      int64_t best_weight = -1;
      for (size_t i = 0; i + 1 < units.size(); ++i) {
        const int64_t w =
            Weight(elements, units[i].begin, units[i + 1].end);
        if (best_weight < 0 || w < best_weight) {
          best = i;
          best_weight = w;
        }
      }
      units[best].end = units[best + 1].end;
      units[best].depth = std::min(units[best].depth, units[best + 1].depth);
      units.erase(units.begin() + best + 1);
    }
  }
  std::vector<int> cuts;
  for (const Unit& u : units) {
    if (cuts.empty() || !pure.forbidden_cut[u.begin]) cuts.push_back(u.begin);
  }
  return cuts;
}

}  // namespace harmony::common::decomposer_internal
