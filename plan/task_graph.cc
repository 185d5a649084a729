#include "plan/task_graph.h"

#include <algorithm>
#include <tuple>

namespace harmony::plan {

std::vector<int> TaskGraph::DeviceTasks(int device) const {
  std::vector<int> out;
  for (const Task& t : tasks) {
    if (t.device == device && t.kind != TaskKind::kUpdate) out.push_back(t.id);
  }
  return out;
}

std::vector<Microbatch> SplitMicrobatches(int first_sample, int samples, int size) {
  std::vector<Microbatch> out;
  for (int at = 0; at < samples; at += size) {
    out.push_back({static_cast<int>(out.size()), first_sample + at,
                   std::min(size, samples - at)});
  }
  return out;
}

bool Config::Prefetches(TaskKind kind, int pack) const {
  if (!prefetch) return false;
  const std::vector<bool>& late = kind == TaskKind::kForward ? late_forward : late_backward;
  return pack < 0 || pack >= static_cast<int>(late.size()) || !late[pack];
}

WaveSlice WaveSamples(const Config& c, int w) {
  const int waves = std::max(1, c.waves);
  const int base = c.minibatch / waves, extra = c.minibatch % waves;
  return {w * base + std::min(w, extra), base + (w < extra ? 1 : 0)};
}

bool SumsGradientsOnHost(const Task& t) {
  return t.kind == TaskKind::kBackward &&
         std::any_of(t.transfers.begin(), t.transfers.end(), [](const Transfer& x) {
           return x.kind == TransferKind::kGradientsOut && x.microbatch >= 0;
         });
}

bool ReducesGradients(const Task& t) {
  return std::any_of(t.transfers.begin(), t.transfers.end(), [](const Transfer& x) {
    return x.kind == TransferKind::kGradientReduce;
  });
}

std::vector<std::map<std::pair<int, int>, int>> GradientSumOrder(const TaskGraph& g) {
  int vlayers = 0;
  for (const Task& t : g.tasks) vlayers = std::max(vlayers, t.vlayers.end);
  // (n-th send of its task, task id, microbatch) per vLayer, then sorted.
  std::vector<std::vector<std::tuple<int, int, int>>> sends(vlayers);
  for (const Task& t : g.tasks) {
    int n = 0;
    for (const Transfer& x : t.transfers) {
      if (x.kind != TransferKind::kGradientsOut) continue;
      for (int k = x.vlayers.begin; k < x.vlayers.end; ++k) {
        sends[k].emplace_back(n, t.id, x.microbatch);
      }
      ++n;
    }
  }
  std::vector<std::map<std::pair<int, int>, int>> order(vlayers);
  for (int k = 0; k < vlayers; ++k) {
    std::sort(sends[k].begin(), sends[k].end());
    for (const auto& [n, task, microbatch] : sends[k]) {
      order[k].emplace(std::make_pair(task, microbatch), static_cast<int>(order[k].size()));
    }
  }
  return order;
}

std::string TaskKindName(TaskKind kind) {
  switch (kind) {
    case TaskKind::kForward: return "forward";
    case TaskKind::kBackward: return "backward";
    case TaskKind::kUpdate: return "update";
  }
  return "?";
}

std::string TransferKindName(TransferKind kind) {
  switch (kind) {
    case TransferKind::kWeightsIn: return "weights-in";
    case TransferKind::kPrefetchWeights: return "prefetch-weights";
    case TransferKind::kGradientsOut: return "gradients-out";
    case TransferKind::kActivationsIn: return "activations-in";
    case TransferKind::kActivationsOut: return "activations-out";
    case TransferKind::kStashOut: return "stash-out";
    case TransferKind::kStashIn: return "stash-in";
    case TransferKind::kKeepResident: return "keep-resident";
    case TransferKind::kKeptOut: return "kept-out";
    case TransferKind::kKeptIn: return "kept-in";
    case TransferKind::kGradientReduce: return "gradient-reduce";
    case TransferKind::kDataIn: return "data-in";
    case TransferKind::kBuffersOut: return "buffers-out";
  }
  return "?";
}

std::string ModeName(Mode mode) { return mode == Mode::kVpp ? "vpp" : "vdp"; }

std::string ScheduleName(Schedule s) {
  switch (s) {
    case Schedule::kHarmony: return "harmony";
    case Schedule::kOndemand: return "ondemand";
    case Schedule::kGpipe: return "gpipe";
    case Schedule::kDpSwap: return "dp-swap";
  }
  return "?";
}

}  // namespace harmony::plan
