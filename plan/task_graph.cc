#include "plan/task_graph.h"

#include <algorithm>

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
