// ValidateConfig and ValidateTaskGraph (task_graph.h): what a configuration
// and a task graph must satisfy before anything runs them.

#include "planner/search/task_graph.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace harmony::planner {
namespace {

absl::Status Invalid(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("invalid configuration: ", why));
}

absl::Status CheckCovers(const Packing& packs, int begin, int end,
                         absl::string_view what) {
  int at = begin;
  for (const PackRange& p : packs) {
    if (p.begin != at || p.end <= p.begin) {
      return Invalid(absl::StrCat(what, " ", PackingString(packs),
                                  " must cover vLayers [", begin, ", ", end,
                                  ") contiguously"));
    }
    at = p.end;
  }
  if (at != end) {
    return Invalid(absl::StrCat(what, " ", PackingString(packs),
                                " must cover vLayers [", begin, ", ", end, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateConfig(const CostModel& m, const Config& c) {
  if (c.num_devices < 1) return Invalid("at least one device is needed");
  if (c.minibatch < 1) return Invalid("the minibatch must be at least 1");
  if (c.backward_microbatch < 1 || c.forward_microbatch < c.backward_microbatch) {
    return Invalid(absl::StrCat("microbatch sizes must satisfy U_f >= U_b >= 1, got U_f ",
                                c.forward_microbatch, " and U_b ",
                                c.backward_microbatch));
  }
  if (c.backward_packs.empty()) return Invalid("there are no backward packs");
  if (!c.backward_pack_microbatch.empty()) {
    if (c.backward_pack_microbatch.size() != c.backward_packs.size()) {
      return Invalid(absl::StrCat("backward microbatches are given for ",
                                  c.backward_pack_microbatch.size(), " backward packs; there are ",
                                  c.backward_packs.size()));
    }
    if (c.schedule != Schedule::kHarmony) {
      return Invalid("backward packs have microbatches of their own only in Harmony's schedules");
    }
    for (size_t q = 0; q < c.backward_packs.size(); ++q) {
      const int u = c.BackwardMicrobatch(static_cast<int>(q));
      if (u < c.backward_microbatch || u > c.forward_microbatch) {
        return Invalid(absl::StrCat("backward pack ", q, "'s microbatch ", u,
                                    " must lie between U_b ", c.backward_microbatch, " and U_f ",
                                    c.forward_microbatch));
      }
      if (u != c.backward_microbatch && m.needs_equal_microbatches()) {
        return Invalid(absl::StrCat("backward pack ", q, "'s microbatch ", u, " differs from U_b ",
                                    c.backward_microbatch, ", but the model draws dropout masks "
                                    "or updates batch statistics (every microbatch must be equal)"));
      }
    }
  }
  if (auto s = CheckCovers(c.backward_packs, 0, m.num_layers(), "backward packs"); !s.ok()) {
    return s;
  }
  const int fused = c.backward_packs.back().begin;
  if (fused == 0) {
    if (!c.forward_packs.empty()) {
      return Invalid("with one backward pack there are no forward packs");
    }
  } else if (auto s = CheckCovers(c.forward_packs, 0, fused, "forward packs"); !s.ok()) {
    return s;
  }
  if (!c.host_sums.empty()) {
    if (c.host_sums.size() != c.backward_packs.size()) {
      return Invalid(absl::StrCat("host sums are given for ", c.host_sums.size(),
                                  " backward packs; there are ", c.backward_packs.size()));
    }
    const bool any = std::find(c.host_sums.begin(), c.host_sums.end(), true) != c.host_sums.end();
    if (any && (c.mode != Mode::kVpp || c.schedule != Schedule::kHarmony)) {
      return Invalid("gradients are summed on the host only in Harmony's vPP");
    }
  }
  if (!c.keep.empty()) {
    if (c.keep.size() != c.backward_packs.size()) {
      return Invalid(absl::StrCat("kept activations are given for ", c.keep.size(),
                                  " backward packs; there are ", c.backward_packs.size()));
    }
    for (size_t q = 0; q < c.keep.size(); ++q) {
      if (!c.keep[q]) continue;
      if (q + 1 == c.keep.size()) {
        return Invalid("the last backward pack cannot keep its activations (it is fused)");
      }
      if (c.schedule != Schedule::kHarmony) {
        return Invalid("activations are kept only in Harmony's schedules");
      }
      if (c.forward_microbatch != c.BackwardMicrobatch(static_cast<int>(q))) {
        return Invalid(absl::StrCat("backward pack ", q, " keeps its activations, which needs "
                                    "equal forward and backward microbatches (U_f ",
                                    c.forward_microbatch, ", the pack's U_b ",
                                    c.BackwardMicrobatch(static_cast<int>(q)), ")"));
      }
      if (KeepSource(c.forward_packs, c.backward_packs[q]) < 0) {
        return Invalid(absl::StrCat("backward pack ", q, " (vLayers ", c.backward_packs[q].begin,
                                    "-", c.backward_packs[q].end - 1,
                                    ") keeps its activations but no forward pack holds all its "
                                    "vLayers"));
      }
    }
  }
  for (const auto& [late, packs, kind] :
       {std::make_tuple(&c.late_forward, &c.forward_packs, "forward"),
        std::make_tuple(&c.late_backward, &c.backward_packs, "backward")}) {
    if (late->empty()) continue;
    if (late->size() != packs->size()) {
      return Invalid(absl::StrCat("late weights are given for ", late->size(), " ", kind,
                                  " packs; there are ", packs->size()));
    }
    if (!c.prefetch && std::find(late->begin(), late->end(), true) != late->end()) {
      return Invalid("late weights are given for a single-buffered plan (nothing is prefetched)");
    }
  }
  if (c.mode == Mode::kVdp && c.minibatch < c.num_devices) {
    return Invalid(absl::StrCat("vDP needs at least one sample per device: minibatch ",
                                c.minibatch, " for ", c.num_devices, " devices"));
  }
  if (c.waves < 1) return Invalid(absl::StrCat("waves must be at least 1, got ", c.waves));
  if (c.inputs_ahead < 0) {
    return Invalid(absl::StrCat("inputs_ahead must be 0 (the default, ", plan::kInputsAhead,
                                ") or more, got ", c.inputs_ahead));
  }
  if (c.host_outputs_pending < 0) {
    return Invalid(absl::StrCat("host_outputs_pending must be 0 (no bound) or more, got ",
                                c.host_outputs_pending));
  }
  if (c.waves > 1) {
    if (c.mode != Mode::kVdp || c.schedule != Schedule::kHarmony) {
      return Invalid("the minibatch runs in waves only in Harmony's vDP");
    }
    if (c.minibatch / c.waves < c.num_devices) {
      return Invalid(absl::StrCat("each of ", c.waves, " waves needs at least one sample per "
                                  "device: minibatch ", c.minibatch, " for ", c.num_devices,
                                  " devices allows at most ", c.minibatch / c.num_devices,
                                  " waves"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTaskGraph(const CostModel& m, const TaskGraph& g) {
  const Config& c = g.config;
  if (auto s = ValidateConfig(m, c); !s.ok()) return s;
  auto fail = [](const Task& t, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task ", t.id, " (", TaskKindName(t.kind), " of pack ", t.pack, "): ", why));
  };
  const int nb = static_cast<int>(c.backward_packs.size());
  const int nf = static_cast<int>(c.forward_packs.size());
  // Samples seen per (phase, pack); updates per pack.
  std::map<std::pair<int, int>, std::vector<int>> samples;
  std::vector<int> updates(nb, 0);
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& t = g.tasks[i];
    if (t.id != static_cast<int>(i)) return fail(t, "ids must follow the global order");
    for (int dep : t.depends_on) {
      if (dep < 0 || dep >= t.id) return fail(t, absl::StrCat("depends on a later task ", dep));
    }
    if (t.device < 0 || t.device >= c.num_devices) return fail(t, "no such device");
    const Packing& packs = t.kind == TaskKind::kForward ? c.forward_packs : c.backward_packs;
    if (t.pack < 0 || t.pack >= static_cast<int>(packs.size()) ||
        !(packs[t.pack] == t.vlayers)) {
      return fail(t, "its vLayers are not its pack's");
    }
    if (t.kind == TaskKind::kUpdate) {
      updates[t.pack]++;
      continue;
    }
    if (t.fused_loss != (t.kind == TaskKind::kBackward && t.pack == nb - 1)) {
      return fail(t, "only the last backward pack fuses forward, loss and backward");
    }
    auto& seen = samples[{t.kind == TaskKind::kForward ? 0 : 1, t.pack}];
    if (seen.empty()) seen.assign(c.minibatch, 0);
    for (const Microbatch& mb : t.microbatches) {
      if (mb.size < 1 || mb.offset < 0 || mb.offset + mb.size > c.minibatch) {
        return fail(t, "a microbatch lies outside the minibatch");
      }
      for (int s = mb.offset; s < mb.offset + mb.size; ++s) seen[s]++;
    }
  }
  for (const auto& [key, seen] : samples) {
    for (int s = 0; s < c.minibatch; ++s) {
      if (seen[s] != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            key.first == 0 ? "forward" : "backward", " pack ", key.second,
            " processes sample ", s, " ", seen[s], " times (expected once)"));
      }
    }
  }
  for (int p = 0; p < nf; ++p) {
    if (!samples.count({0, p})) {
      return absl::InvalidArgumentError(absl::StrCat("forward pack ", p, " has no task"));
    }
  }
  for (int q = 0; q < nb; ++q) {
    if (!samples.count({1, q})) {
      return absl::InvalidArgumentError(absl::StrCat("backward pack ", q, " has no task"));
    }
    if (updates[q] != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backward pack ", q, " has ", updates[q], " updates (expected 1)"));
    }
  }
  // Every send has its receive with the same total bytes.
  auto total = [](const Task& t, TransferKind kind, int peer) {
    uint64_t bytes = 0;
    bool any = false;
    for (const Transfer& x : t.transfers) {
      if (x.kind == kind && x.peer_task == peer) {
        bytes += x.bytes;
        any = true;
      }
    }
    return std::make_pair(any, bytes);
  };
  const std::vector<std::pair<TransferKind, TransferKind>> pairs = {
      {TransferKind::kActivationsOut, TransferKind::kActivationsIn},
      {TransferKind::kStashOut, TransferKind::kStashIn},
      {TransferKind::kKeptOut, TransferKind::kKeptIn},
  };
  // A device's weights copied from another device's: from its task at the
  // same place in that device's list (same pack and kind), which swaps
  // them in from the host.
  auto peer_weights_source = [&](const Task& t, const Transfer& x) -> absl::Status {
    if (x.peer_device < 0 || x.peer_device >= g.config.num_devices || x.peer_device == t.device) {
      return fail(t, absl::StrCat("copies its weights from device ", x.peer_device));
    }
    const std::vector<int> mine = g.DeviceTasks(t.device);
    const std::vector<int> theirs = g.DeviceTasks(x.peer_device);
    const size_t at = std::find(mine.begin(), mine.end(), t.id) - mine.begin();
    if (at >= theirs.size()) return fail(t, "copies its weights from no task");
    const Task& source = g.tasks[theirs[at]];
    bool from_host = false;
    for (const Transfer& y : source.transfers) {
      from_host = from_host ||
                  (y.kind == TransferKind::kWeightsIn && y.channel == Channel::kHost);
    }
    if (source.kind != t.kind || source.pack != t.pack || !from_host) {
      return fail(t, absl::StrCat("copies its weights from task ", source.id,
                                  ", which does not swap in the same pack's"));
    }
    return absl::OkStatus();
  };
  for (const Task& t : g.tasks) {
    for (const Transfer& x : t.transfers) {
      if (x.kind == TransferKind::kWeightsIn && x.channel == Channel::kPeer) {
        if (absl::Status s = peer_weights_source(t, x); !s.ok()) return s;
      }
    }
    for (const auto& [out, in] : pairs) {
      std::map<int, bool> peers;
      for (const Transfer& x : t.transfers) {
        if (x.kind == out) peers[x.peer_task] = true;
      }
      for (const auto& [peer, unused] : peers) {
        if (peer < 0 || peer >= static_cast<int>(g.tasks.size())) {
          return fail(t, absl::StrCat(TransferKindName(out), " to no task"));
        }
        const auto sent = total(t, out, peer);
        const auto got = total(g.tasks[peer], in, t.id);
        // The same bytes when both split the samples alike; otherwise a
        // tensor without a batch dimension (a mask, positions) crosses once
        // per microbatch on each side, so the totals differ by its copies.
        const Task& to = g.tasks[peer];
        bool alike = t.microbatches.size() == to.microbatches.size();
        for (size_t m = 0; alike && m < t.microbatches.size(); ++m) {
          alike = t.microbatches[m].size == to.microbatches[m].size;
        }
        if (!got.first || (alike && got.second != sent.second)) {
          return fail(t, absl::StrCat(TransferKindName(out), " of ", sent.second,
                                      " bytes to task ", peer, " is received as ",
                                      got.second, " bytes"));
        }
      }
    }
    for (const Transfer& x : t.transfers) {
      if (x.kind == TransferKind::kPrefetchWeights) {
        if (x.peer_task <= t.id || x.peer_task >= static_cast<int>(g.tasks.size())) {
          return fail(t, "prefetches the weights of no later task");
        }
        const auto in = total(g.tasks[x.peer_task], TransferKind::kWeightsIn, t.id);
        if (!in.first || in.second != x.bytes) {
          return fail(t, absl::StrCat("prefetch for task ", x.peer_task,
                                      " does not match its weight swap-in"));
        }
      }
      if (x.kind == TransferKind::kGradientsOut &&
          (x.peer_task < 0 || g.tasks[x.peer_task].kind != TaskKind::kUpdate)) {
        return fail(t, "sends gradients to no update");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace harmony::planner
