#include "planner/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "planner/sim/sim.h"

namespace harmony::planner {
namespace sim_internal {

// List scheduling: repeatedly start, among the operations at the head of
// their stream whose dependencies are done, the one that can start first
// (the lowest id among equals). The candidates wait in a heap by the start
// they had when offered; starts only grow (streams and the link only get
// busier), so one popped with a stale start is offered again at its
// current one, and one popped with its current start is the earliest.
absl::Status Sim::Schedule() {
  const size_t nq = queues_.size();
  std::vector<size_t> head(nq, 0);
  std::vector<double> stream_free(nq, 0.0);
  double link_free[2] = {0, 0};
  // The graph's shape, once per simulation (a reweighed one schedules
  // again): each op's queue, and the ops waiting on each (op i's:
  // dependents_[first_dependent_[i], first_dependent_[i + 1]), in one array:
  // a vector per op made most of a search's allocations).
  if (queue_of_.size() != ops_.size()) {
    queue_of_.assign(ops_.size(), 0);
    for (size_t q = 0; q < nq; ++q) {
      for (int id : queues_[q]) queue_of_[id] = q;
    }
    first_dependent_.assign(ops_.size() + 1, 0);
    for (const Op& op : ops_) {
      for (int dep : op.deps) ++first_dependent_[dep + 1];
    }
    for (size_t id = 0; id < ops_.size(); ++id) {
      first_dependent_[id + 1] += first_dependent_[id];
    }
    dependents_.assign(first_dependent_.back(), 0);
    std::vector<int> at(first_dependent_.begin(), first_dependent_.end() - 1);
    for (size_t id = 0; id < ops_.size(); ++id) {
      for (int dep : ops_[id].deps) dependents_[at[dep]++] = static_cast<int>(id);
    }
  }
  const std::vector<size_t>& queue_of = queue_of_;
  // Unscheduled dependencies of each op.
  std::vector<int> waiting(ops_.size(), 0);
  for (size_t id = 0; id < ops_.size(); ++id) {
    waiting[id] = static_cast<int>(ops_[id].deps.size());
  }
  // The latest end among each op's scheduled dependencies (all of them
  // once it is offered).
  std::vector<double> deps_end(ops_.size(), 0.0);
  auto start_of = [&](int id) {
    const Op& op = ops_[id];
    double start = std::max(stream_free[queue_of[id]], deps_end[id]) + op.lead;
    if (op.link != kNoLink) start = std::max(start, link_free[op.link]);
    return start;
  };
  using Entry = std::pair<double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  auto offer = [&](size_t q) {
    if (head[q] >= queues_[q].size()) return;
    const int id = queues_[q][head[q]];
    if (waiting[id] == 0) ready.push({start_of(id), id});
  };
  for (size_t q = 0; q < nq; ++q) offer(q);
  size_t done = 0;
  while (!ready.empty()) {
    const auto [offered, id] = ready.top();
    ready.pop();
    Op& op = ops_[id];
    if (op.end >= 0) continue;  // Offered twice.
    const double start = start_of(id);
    if (start > offered) {
      ready.push({start, id});
      continue;
    }
    op.start = start;
    op.end = start + op.duration;
    const size_t q = queue_of[id];
    stream_free[q] = op.end;
    head[q]++;
    if (op.link != kNoLink) link_free[op.link] = op.end;
    ++done;
    for (int i = first_dependent_[id]; i < first_dependent_[id + 1]; ++i) {
      const int w = dependents_[i];
      deps_end[w] = std::max(deps_end[w], op.end);
      if (--waiting[w] == 0) {
        const size_t wq = queue_of[w];
        if (head[wq] < queues_[wq].size() && queues_[wq][head[wq]] == w) {
          ready.push({start_of(w), w});
        }
      }
    }
    offer(q);
  }
  if (done < ops_.size()) {
    return absl::InternalError("the task graph cannot make progress (a dependency cycle)");
  }
  return absl::OkStatus();
}

bool Sim::Reweigh() {
  const int neighbours = m_.busy_neighbours();
  if (neighbours <= 0 || c_.num_devices < 2) return false;
  // Each device's computes, in the order its compute stream ran them.
  std::vector<const std::vector<int>*> on(c_.num_devices, &empty_ops_);
  bool differ = false;
  for (int d = 0; d < c_.num_devices; ++d) {
    const size_t q = Queue(d, kCompute);
    if (q >= queues_.size()) continue;
    on[d] = &queues_[q];
    for (int id : queues_[q]) differ = differ || ops_[id].busy != ops_[id].alone;
  }
  if (!differ) return false;
  // Seconds of [from, until) during which device e computes; `next[e]`
  // walks e's computes forward as device d's do.
  std::vector<size_t> next(c_.num_devices, 0);
  auto computing = [&](int e, double from, double until) {
    const std::vector<int>& list = *on[e];
    size_t& i = next[e];
    while (i < list.size() && ops_[list[i]].end <= from) ++i;
    double t = 0;
    for (size_t j = i; j < list.size() && ops_[list[j]].start < until; ++j) {
      t += std::min(until, ops_[list[j]].end) - std::max(from, ops_[list[j]].start);
    }
    return t;
  };
  std::vector<double> duration(ops_.size(), -1);
  double change = 0;
  for (int d = 0; d < c_.num_devices; ++d) {
    std::fill(next.begin(), next.end(), 0);
    for (int id : *on[d]) {
      const Op& op = ops_[id];
      if (op.alone < 0) continue;
      double share = 0;
      if (op.end > op.start) {
        double beside = 0;
        for (int e = 0; e < c_.num_devices; ++e) {
          if (e != d) beside += computing(e, op.start, op.end);
        }
        share = std::min(1.0, beside / (op.end - op.start) / neighbours);
      }
      duration[id] = op.alone + (op.busy - op.alone) * share;
      change = std::max(change,
                        std::abs(duration[id] - op.duration) / std::max(op.duration, 1e-12));
    }
  }
  if (change < 1e-4) return false;  // Settled: the schedule stands.
  for (size_t id = 0; id < ops_.size(); ++id) {
    if (duration[id] >= 0) ops_[id].duration = duration[id];
    ops_[id].start = ops_[id].end = -1;
  }
  return true;
}

// When a hold's bytes are allocated and freed.
std::pair<double, double> Sim::Span(const Hold& h) const {
  double from = h.from_end ? ops_[h.from_op].end : ops_[h.from_op].start;
  if (h.or_from_op >= 0) {
    double early = ops_[h.or_from_op].start;
    if (h.or_from_after_op >= 0) early = std::max(early, ops_[h.or_from_after_op].end);
    from = std::min(from, early);
  }
  if (h.after_hold >= 0) from = std::max(from, Span(holds_[h.after_hold]).second);
  double until = h.until_op < 0 ? TaskEnd(-h.until_op - 1) : ops_[h.until_op].end;
  for (int op : h.until_also) until = std::max(until, ops_[op].end);
  if (h.until_start_of >= 0) until = std::max(until, ops_[h.until_start_of].start);
  if (h.at_least_past_position >= 0) {
    const std::vector<int>& list = device_tasks_.at(h.device);
    const size_t next = static_cast<size_t>(h.at_least_past_position) + 1;
    if (next < list.size()) until = std::max(until, TaskEnd(list[next]));
  }
  return {from, std::max(from, until)};
}

double Sim::TaskEnd(int task) const { return task_end_[task]; }

SimResult Sim::Collect(bool keep_events) {
  SimResult r;
  r.busy.assign(c_.num_devices, {});
  r.handoff_s.assign(c_.num_devices, 0.0);
  for (const Op& op : ops_) {
    r.iteration_s = std::max(r.iteration_s, op.end);
    if (op.device < 0) {
      r.optimizer_busy_s += op.duration;
    } else {
      r.busy[op.device][op.stream] += op.duration;
      r.handoff_s[op.device] += op.lead;
    }
    if (keep_events) {
      r.events.push_back({op.name, op.device, op.stream, op.start, op.end});
    }
  }
  // Each task's end, once (holds ask for it many times over).
  task_end_.assign(end_ops_.size(), 0.0);
  for (size_t t = 0; t < end_ops_.size(); ++t) {
    for (int op : end_ops_[t]) task_end_[t] = std::max(task_end_[t], ops_[op].end);
  }
  // Memory: sweep allocation and free events per device (frees first at
  // equal times).
  std::vector<std::vector<std::pair<double, int64_t>>> events(c_.num_devices);
  {
    std::vector<size_t> per_device(c_.num_devices, 0);
    for (const Hold& h : holds_) per_device[h.device] += h.bytes > 0 ? 2 : 0;
    for (int d = 0; d < c_.num_devices; ++d) events[d].reserve(per_device[d]);
  }
  for (const Hold& h : holds_) {
    if (h.bytes == 0) continue;
    const auto [from, until] = Span(h);
    events[h.device].push_back({from, static_cast<int64_t>(h.bytes)});
    events[h.device].push_back({until, -static_cast<int64_t>(h.bytes)});
  }
  r.device_peak.assign(c_.num_devices, 0);
  for (int d = 0; d < c_.num_devices; ++d) {
    auto& e = events[d];
    std::sort(e.begin(), e.end());  // Negative (frees) first at equal times.
    int64_t now = 0;
    for (const auto& [t, delta] : e) {
      now += delta;
      // A hold of no duration frees before it allocates (frees first).
      if (now > 0) r.device_peak[d] = std::max<uint64_t>(r.device_peak[d], now);
    }
    if (r.device_peak[d] > c_.device_memory) r.fits = false;
  }
  r.largest_host_input = largest_host_input_;
  // Sends copied out in order on a device's stream: those of microbatches
  // before m not yet done when m starts are the last ones.
  for (const auto& sends : host_sends_) {
    size_t done = 0;
    for (size_t m = 0; m < sends.size(); ++m) {
      const double start = ops_[sends[m].first].start;
      while (done < m &&
             (sends[done].second < 0 || ops_[sends[done].second].end <= start)) {
        ++done;
      }
      r.host_outputs_pending = std::max(r.host_outputs_pending, static_cast<int>(m - done));
    }
  }
  uint64_t stash = 0;
  for (const Task& t : g_.tasks) {
    for (const Transfer& x : t.transfers) {
      switch (x.kind) {
        case TransferKind::kWeightsIn:
          (x.channel == Channel::kPeer ? r.swap.peer : r.swap.weights_in) += x.bytes;
          break;
        case TransferKind::kGradientsOut:
        case TransferKind::kBuffersOut: r.swap.gradients_out += x.bytes; break;
        case TransferKind::kStashOut: r.swap.stash_out += x.bytes; stash += x.bytes; break;
        case TransferKind::kStashIn: r.swap.stash_in += x.bytes; break;
        case TransferKind::kKeptOut: r.swap.kept_out += x.bytes; stash += x.bytes; break;
        case TransferKind::kKeptIn: r.swap.kept_in += x.bytes; break;
        case TransferKind::kDataIn: r.swap.data_in += x.bytes; break;
        case TransferKind::kActivationsIn:
          if (x.channel == Channel::kHost) r.swap.activations_in += x.bytes;
          break;
        case TransferKind::kActivationsOut:
          if (x.channel == Channel::kHost) r.swap.activations_out += x.bytes;
          if (x.channel == Channel::kPeer) r.swap.peer += x.bytes;
          break;
        case TransferKind::kGradientReduce: r.swap.peer += x.bytes; break;
        default: break;
      }
    }
  }
  const int layers = m_.num_layers();
  const NetworkModel& net = m_.network();
  const uint64_t state = m_.OptimizerStateBytes(0, layers);
  r.host_memory = m_.HostWeightBytes(0, layers) + m_.HostGradientBytes(0, layers) +
                  (net.shard_optimizer_state ? (state + net.servers - 1) / net.servers : state) +
                  stash + r.swap.activations_out;
  r.network_bytes = m_.ReduceBytesPerServer(0, layers);
  r.iteration_s += m_.IterationSyncSeconds();
  return r;
}

}  // namespace sim_internal

double SimResult::device_compute_s() const {
  double compute = 0;
  for (const auto& streams : busy) compute += streams[kCompute];
  return compute;
}

absl::StatusOr<SimResult> Simulate(const CostModel& model, const TaskGraph& graph,
                                   bool keep_events, ClipSim clip) {
  sim_internal::Sim sim(model, graph, clip);
  return sim.Run(keep_events);
}

std::string StreamName(Stream stream) {
  switch (stream) {
    case kSwapIn: return "swap-in";
    case kSwapOut: return "swap-out";
    case kCompute: return "compute";
    case kPeer: return "peer";
    case kWeightsIn: return "weights-in";
    default: return "?";
  }
}

std::string ChromeTrace(const SimResult& result) {
  nlohmann::json events = nlohmann::json::array();
  const int devices = static_cast<int>(result.busy.size());
  for (int d = -1; d < devices; ++d) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", d + 1},
                      {"args", {{"name", d < 0 ? "host (CPU optimizer)"
                                               : absl::StrCat("device ", d)}}}});
    for (int s = 0; s < kNumStreams; ++s) {
      if (d < 0 && s != kCompute) continue;
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", d + 1}, {"tid", s},
                        {"args", {{"name", d < 0 ? "optimizer"
                                                 : StreamName(static_cast<Stream>(s))}}}});
    }
  }
  for (const TraceEvent& e : result.events) {
    events.push_back({{"name", e.name}, {"ph", "X"}, {"pid", e.device + 1},
                      {"tid", static_cast<int>(e.stream)}, {"ts", e.start_s * 1e6},
                      {"dur", (e.end_s - e.start_s) * 1e6}});
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace harmony::planner
