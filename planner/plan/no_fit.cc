#include "planner/plan/no_fit.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/units.h"

namespace harmony::planner {
namespace {

constexpr uint64_t kGranule = uint64_t{64} << 10;  // Answers are multiples of it.
constexpr uint64_t kLimit = uint64_t{1} << 50;      // 1 PiB.

uint64_t RoundUp(uint64_t bytes) { return (bytes + kGranule - 1) / kGranule * kGranule; }

// Whether the search finds a plan that fits at `memory`.
absl::StatusOr<bool> Plans(const proto::ProfileFile& profile, MakePlanOptions options,
                           uint64_t memory) {
  options.device_memory = memory;
  absl::StatusOr<MadePlan> made = MakePlan(profile, options);
  if (absl::IsResourceExhausted(made.status())) return false;
  if (!made.ok()) return made.status();
  return made->result.sim.fits;
}

}  // namespace

absl::StatusOr<uint64_t> SmallestDeviceMemory(const proto::ProfileFile& profile,
                                              MakePlanOptions options) {
  if (profile.profile().vlayers().empty() ||
      profile.profile().vlayers(0).by_microbatch().empty()) {
    return absl::InvalidArgumentError("the profile has no measurements");
  }
  // The smallest microbatch needs the least memory; a pinned one is kept
  // (the answer is for what the user asked).
  if (options.microbatch <= 0) {
    options.microbatch = static_cast<int>(profile.profile().vlayers(0).by_microbatch(0).size());
  }
  const auto progress = std::move(options.progress);
  options.progress = nullptr;
  options.any_fit = true;
  auto say = [&](uint64_t memory) {
    if (progress) {
      progress(absl::StrCat("finding the smallest device memory that plans: trying ",
                            common::FormatBytes(memory)));
    }
  };
  // A bracket [lo, hi): lo does not plan, hi does.
  uint64_t lo = 0;
  uint64_t hi = RoundUp(std::max<uint64_t>(options.device_memory, kGranule));
  for (;;) {
    say(hi);
    absl::StatusOr<bool> ok = Plans(profile, options, hi);
    if (!ok.ok()) return ok.status();
    if (*ok) break;
    lo = hi;
    if (hi >= kLimit) {
      return absl::NotFoundError(absl::StrCat("no plan even with ", common::FormatBytes(hi),
                                              " per device"));
    }
    hi *= 2;
  }
  while (hi - lo > std::max<uint64_t>(kGranule, hi / 100)) {
    const uint64_t mid = RoundUp(lo + (hi - lo) / 2);
    if (mid >= hi || mid <= lo) break;
    say(mid);
    absl::StatusOr<bool> ok = Plans(profile, options, mid);
    if (!ok.ok()) return ok.status();
    (*ok ? hi : lo) = mid;
  }
  return hi;
}

absl::StatusOr<LargestVLayer> FindLargestVLayer(const proto::ProfileFile& profile) {
  absl::StatusOr<std::shared_ptr<const CostModel>> cost = CostModel::Create(profile);
  if (!cost.ok()) return cost.status();
  const proto::Profile& p = profile.profile();
  const auto& dec = profile.model().decomposition();
  LargestVLayer best;
  for (int k = 0; k < p.vlayers_size(); ++k) {
    const proto::VLayerProfile& v = p.vlayers(k);
    if (v.by_microbatch().empty()) continue;
    const proto::MicrobatchProfile& row = v.by_microbatch(0);
    const bool backward = row.backward_peak_bytes() >= row.forward_peak_bytes();
    const uint64_t need = std::max(row.forward_peak_bytes(), row.backward_peak_bytes());
    if (best.index >= 0 && need <= best.need_bytes) continue;
    best.index = k;
    best.need_bytes = need;
    best.backward = backward;
    best.host_summed_bytes =
        backward && row.backward_first_peak_bytes() > 0 &&
                row.backward_first_peak_bytes() < row.backward_peak_bytes()
            ? std::max(row.forward_peak_bytes(), row.backward_first_peak_bytes())
            : 0;
    best.microbatch = static_cast<int>(row.size());
    best.weight_bytes = v.parameter_bytes() + v.buffer_bytes();
    best.gradient_bytes = v.gradient_bytes();
    const LayerCost c = (*cost)->Cost(k, best.microbatch);
    best.activation_bytes = c.input_bytes + c.output_bytes + c.saved_bytes;
    if (k < dec.vlayers_size()) {
      best.scope = dec.vlayers(k).scope();
      best.node_begin = static_cast<int>(dec.vlayers(k).node_begin());
      best.node_end = static_cast<int>(dec.vlayers(k).node_end());
    }
  }
  if (best.index < 0) return absl::InvalidArgumentError("the profile has no measurements");
  return best;
}

std::string DescribeNoFit(const LargestVLayer& layer, const MakePlanOptions& options,
                          uint64_t smallest) {
  std::string where;
  if (!layer.scope.empty() || layer.node_end > layer.node_begin) {
    where = absl::StrCat(" (", layer.scope.empty() ? "" : layer.scope,
                         layer.scope.empty() ? "" : ", ", "ops ", layer.node_begin, "-",
                         layer.node_end - 1, " of forward)");
  }
  std::string out = absl::StrFormat(
      "nothing fits %d device(s) of %s (%.0f%% kept free, --memory-reserve): vLayer %d%s alone "
      "needs %s for its %s at microbatch %d (weights %s, gradients %s, activations %s)",
      options.num_devices, common::FormatBytes(options.device_memory),
      100 * options.memory_reserve, layer.index, where, common::FormatBytes(layer.need_bytes),
      layer.backward ? "backward" : "forward", layer.microbatch,
      common::FormatBytes(layer.weight_bytes), common::FormatBytes(layer.gradient_bytes),
      common::FormatBytes(layer.activation_bytes));
  if (layer.host_summed_bytes > 0) {
    absl::StrAppend(&out, ", or ", common::FormatBytes(layer.host_summed_bytes),
                    " with its gradients summed on the host after each microbatch (vPP, more "
                    "than one microbatch)");
  }
  if (smallest > 0) {
    absl::StrAppend(&out, "; the smallest --device-memory that plans is ",
                    common::FormatBytes(smallest),
                    options.microbatch > 0 ? absl::StrCat(" at --microbatch ", options.microbatch)
                                           : "");
  } else {
    absl::StrAppend(&out, "; no device memory up to 1 PiB plans");
  }
  return out;
}

}  // namespace harmony::planner
