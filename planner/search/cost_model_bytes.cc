// The cost model's bytes (cost_model.h): activations crossing between
// packs, and the device memory a pack needs while it runs. Times, sizes and
// the profile's reading: cost_model.cc.

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "planner/search/cost_model.h"

namespace harmony::planner {
namespace {

// The (vLayer, output) pairs a sum of bytes has counted. A range of vLayers
// reads few outputs from outside it, so they sit inline until there are
// many: a std::set allocated on every call, and a search calls these for
// every edge of every task graph it builds.
class Seen {
 public:
  // False when `ref` was inserted before.
  bool Insert(std::pair<int, int> ref) {
    if (!many_.empty()) return many_.insert(ref).second;
    if (std::find(few_.begin(), few_.end(), ref) != few_.end()) return false;
    if (few_.size() < kFew) {
      few_.push_back(ref);
    } else {
      many_.insert(few_.begin(), few_.end());
      many_.insert(ref);
    }
    return true;
  }

 private:
  static constexpr size_t kFew = 16;
  absl::InlinedVector<std::pair<int, int>, kFew> few_;
  absl::flat_hash_set<std::pair<int, int>> many_;
};

uint64_t Sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

// The bytes at microbatch `u` of a vLayer's inputs (`in`, with their
// `slots`) made before vLayer `begin`, each output counted once over
// `seen`. (A template: CostModel's slot type is its own.)
template <typename Slot>
uint64_t InputsFromBefore(const std::vector<std::pair<int, int>>& in,
                          const std::vector<Slot>& slots, int begin, int u, Seen& seen) {
  uint64_t total = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].first >= begin || !seen.Insert(in[i])) continue;
    if (i < slots.size()) total += slots[i].Bytes(u);
  }
  return total;
}

}  // namespace

uint64_t CostModel::PackInputBytes(int begin, int end, int u) const {
  if (inputs_.empty()) return Cost(begin, u).input_bytes;
  Seen seen;
  uint64_t total = 0;
  for (int l = begin; l < end; ++l) {
    total += InputsFromBefore(inputs_[l], in_slots_[l], begin, u, seen);
  }
  return total;
}

uint64_t CostModel::PackOutputBytes(int begin, int end, int u) const {
  if (inputs_.empty()) return Cost(end - 1, u).output_bytes;
  Seen needed;
  uint64_t total = 0;
  for (int l = end; l < num_layers(); ++l) {
    for (const auto& ref : inputs_[l]) {
      if (ref.first < begin || ref.first >= end || !needed.Insert(ref)) continue;
      const auto& slots = out_slots_[ref.first];
      if (ref.second >= 0 && ref.second < static_cast<int>(slots.size())) {
        total += slots[ref.second].Bytes(u);
      }
    }
  }
  return total;
}

uint64_t CostModel::CrossBytes(int pb, int pe, int cb, int ce, int u,
                               bool gradients) const {
  if (inputs_.empty()) {  // A chain: each vLayer reads the one before.
    if (pb < 0) return cb == 0 ? Cost(0, u).input_bytes : 0;
    return pe == cb ? Cost(pe - 1, u).output_bytes : 0;
  }
  Seen seen;
  uint64_t total = 0;
  for (int l = cb; l < ce; ++l) {
    const auto& in = inputs_[l];
    for (size_t i = 0; i < in.size(); ++i) {
      const int producer = in[i].first;
      const bool inside = pb < 0 ? producer < 0 : (producer >= pb && producer < pe);
      if (!inside || !seen.Insert(in[i])) continue;
      const Slot* sl = nullptr;
      if (producer >= 0 && in[i].second < static_cast<int>(out_slots_[producer].size())) {
        sl = &out_slots_[producer][in[i].second];
      } else if (i < in_slots_[l].size()) {
        sl = &in_slots_[l][i];
      }
      if (sl != nullptr && (!gradients || sl->floating)) total += sl->Bytes(u);
    }
  }
  return total;
}

bool CostModel::Reads(int pb, int pe, int cb, int ce) const {
  if (inputs_.empty()) return pb < 0 ? cb == 0 : pe == cb;
  for (int l = cb; l < ce; ++l) {
    for (const auto& [producer, index] : inputs_[l]) {
      if (pb < 0 ? producer < 0 : (producer >= pb && producer < pe)) return true;
    }
  }
  return false;
}

std::vector<int> CostModel::Producers(int layer) const {
  if (inputs_.empty()) return layer > 0 ? std::vector<int>{layer - 1} : std::vector<int>{};
  std::vector<int> out;
  for (const auto& [producer, index] : inputs_[layer]) {
    if (producer >= 0 && std::find(out.begin(), out.end(), producer) == out.end()) {
      out.push_back(producer);
    }
  }
  return out;
}

uint64_t CostModel::KeptBytes(int begin, int end, int u) const {
  uint64_t total = 0;
  for (int l = begin; l < end; ++l) total += Cost(l, u).kept_bytes;
  return total;
}

uint64_t CostModel::ForwardMemory(int begin, int end, int u) const {
  uint64_t transient = 0;
  for (int l = begin; l < end; ++l) {
    transient = std::max(transient, Sub(Cost(l, u).forward_peak, sizes_[l].weight_bytes()));
  }
  return WeightBytes(begin, end) + transient;
}

uint64_t CostModel::InputBytesFromBefore(int layer, int begin, int u) const {
  if (inputs_.empty()) return layer == begin ? Cost(layer, u).input_bytes : 0;
  Seen seen;
  return InputsFromBefore(inputs_[layer], in_slots_[layer], begin, u, seen);
}

uint64_t CostModel::ForwardWorkingBytes(int begin, int end, int u) const {
  uint64_t working = 0;
  for (int l = begin; l < end; ++l) {
    working = std::max(working, Sub(Cost(l, u).forward_peak,
                                    sizes_[l].weight_bytes() + InputBytesFromBefore(l, begin, u)));
  }
  return working;
}

uint64_t CostModel::BackwardTop(int begin, int end, int u, bool seed_held,
                                bool first) const {
  uint64_t saved = 0;  // Of the vLayers up to l.
  uint64_t top = 0;
  for (int l = begin; l < end; ++l) {
    const LayerCost c = Cost(l, u);
    const LayerSizes& s = sizes_[l];
    if (!measured_saved_) {
      saved += Sub(c.backward_peak, s.weight_bytes() + s.gradient_bytes + c.input_bytes);
      top = saved;
      continue;
    }
    saved += c.saved_bytes;
    uint64_t peak = c.backward_peak;
    uint64_t held = s.weight_bytes() + c.input_bytes + c.saved_bytes;
    if (first && c.backward_first_peak > 0) {
      // Autograd makes this vLayer's gradients as it goes (they are in the
      // peak); the later vLayers' exist by the time it runs.
      peak = c.backward_first_peak + GradientBytes(l + 1, end);
    } else if (peak_with_gradients_) {
      // The pack's gradients are counted once by the caller; a peak measured
      // with them allocated holds this vLayer's.
      held += s.gradient_bytes;
    }
    // The profiler seeds the backward of every floating output with a
    // tensor of ones: at the pack's last vLayer, the gradients that arrive.
    if (seed_held && l == end - 1 && l < num_layers() - 1) {
      if (out_slots_.empty()) {
        held += c.output_bytes;
      } else {
        for (const Slot& sl : out_slots_[l]) {
          if (sl.floating) held += sl.Bytes(u);
        }
      }
    }
    top = std::max(top, saved + Sub(peak, held));
  }
  return std::max(top, saved);
}

uint64_t CostModel::BackwardMemory(int begin, int end, int u, bool host_sums) const {
  const uint64_t fixed = WeightBytes(begin, end) + PackInputBytes(begin, end, u);
  const uint64_t first = BackwardTop(begin, end, u, false, true);
  // Summed on the host, every microbatch is a first one: its gradients are
  // made as it goes and leave before the next.
  if (host_sums && first_peaks_) return fixed + first;
  const uint64_t later = GradientBytes(begin, end) + BackwardTop(begin, end, u, false, false);
  return fixed + std::max(later, first);
}

uint64_t CostModel::BackwardWorkingBytes(int begin, int end, int u, bool first) const {
  return BackwardTop(begin, end, u, true, first);
}

uint64_t CostModel::TargetBytes(int microbatch) const {
  return target_bytes_per_sample_ * static_cast<uint64_t>(microbatch);
}

}  // namespace harmony::planner
