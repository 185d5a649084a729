// The simulator's machine (internal to planner/sim): the operations of one
// iteration on their streams, the memory each holds, and the simulation
// class. sim_build.cc turns a task graph into operations and holds (Build);
// simulator.cc schedules them on the streams and the host link (Schedule),
// sweeps the memory (Collect) and writes the trace.
//
// Thread-safety: a Sim is confined to the thread that runs it.

#ifndef HARMONY_PLANNER_SIM_SIM_H_
#define HARMONY_PLANNER_SIM_SIM_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "planner/search/cost_model.h"
#include "planner/search/task_graph.h"
#include "planner/sim/simulator.h"

namespace harmony::planner::sim_internal {

enum Link { kNoLink = -1, kToDevice = 0, kToHost = 1 };

// An op's dependencies while Build gathers them: a few, inline.
using Deps = absl::InlinedVector<int, 8>;

struct Op {
  int device = 0;  // -1: host CPU.
  Stream stream = kCompute;
  Link link = kNoLink;
  double duration = 0;
  // A device's compute: its time beside the profile's other devices, all
  // busy, and with none computing (-1: not a device's compute). Its
  // duration lies between the two (Reweigh).
  double busy = -1;
  double alone = -1;
  // Starts this long after its stream and dependencies allow: a compute's
  // step hand-off on its device's thread (CostModel::StepHandoffSeconds).
  double lead = 0;
  // Most ops wait for one to three others: inline (a vector per op made
  // much of a search's malloc and free, ~22% of its time with the rest).
  absl::InlinedVector<int, 4> deps;
  std::string name;
  double start = -1;
  double end = -1;
};

// Memory held on a device from the start of one op to the end of another.
struct Hold {
  int device;
  uint64_t bytes;
  int from_op;      // Allocated when this op starts...
  int until_op;     // ...freed when this op ends.
  // Or when this op starts, if earlier: a prefetch's buffer is allocated
  // when the task it overlaps starts, however late the copy begins.
  int or_from_op = -1;
  // Held at least until the device's next task after this one has ended: a
  // copy out runs on its own thread in the runtime and may be that late
  // however fast the link (the runtime starts the task after that next one
  // only once the copy is done).
  // (The task's position in its device's list; -1: no such bound.)
  int at_least_past_position = -1;
  // Allocated when from_op ends rather than starts: what a compute makes
  // counts in its working set until then.
  bool from_end = false;
  // And not before these ops have ended (copies other devices take of it).
  std::vector<int> until_also;
  // With or_from_op: not before this op has ended either (a prefetch waits
  // for what the task two before it copies out).
  int or_from_after_op = -1;
  // Allocated no earlier than hold `after_hold` is freed: bytes that take
  // the place of that hold's (a prefetch's buffer in the room of gradients
  // going out, never on the device together in the runtime).
  int after_hold = -1;
  // Held at least until this op starts: sends to the host that the runtime
  // waits for before that compute (Config::host_outputs_pending, kept
  // activations two microbatches on), however late its copy thread runs.
  int until_start_of = -1;
};

class Sim {
 public:
  Sim(const CostModel& m, const TaskGraph& g, ClipSim clip = ClipSim::kOff)
      : m_(m), g_(g), c_(g.config), clip_(clip) {
    const LinkBandwidths& bw = m.bandwidths();
    const bool shared = c_.num_devices > 1;
    to_device_bw_ = shared ? std::min(bw.host_to_device, bw.host_all_devices)
                           : bw.host_to_device;
    to_host_bw_ = shared ? std::min(bw.device_to_host, bw.host_all_devices)
                         : bw.device_to_host;
    peer_bw_ = bw.peer;
    transfer_latency_ = bw.transfer_latency_s;
  }

  absl::StatusOr<SimResult> Run(bool keep_events) {
    keep_events_ = keep_events;
    Build();
    if (auto s = Schedule(); !s.ok()) return s;
    // One pass weighs every compute by the devices computing beside it in
    // the schedule with all busy: more passes moved the iteration by less
    // than 0.01% on the bench's plans and 0.8% with a slowdown of 2
    // (busy_neighbours_test), for another schedule each.
    if (Reweigh()) {
      if (auto s = Schedule(); !s.ok()) return s;
    }
    return Collect(keep_events);
  }

 private:
  // An op's name, made only when the caller keeps the events (names are
  // most of the allocations of a search's many simulations).
  template <typename F>
  std::string Name(F make) const {
    return keep_events_ ? make() : std::string();
  }

  int Add(int device, Stream stream, Link link, double duration, absl::Span<const int> deps,
          std::string name) {
    Op op;
    op.device = device;
    op.stream = stream;
    op.link = link;
    // A host transfer's fixed cost holds its stream and the link.
    op.duration = duration + (link != kNoLink ? transfer_latency_ : 0.0);
    op.deps.assign(deps.begin(), deps.end());
    op.name = std::move(name);
    ops_.push_back(std::move(op));
    const int id = static_cast<int>(ops_.size()) - 1;
    if (device >= 0) {
      if (first_op_on_.size() <= static_cast<size_t>(device)) first_op_on_.resize(device + 1, -1);
      if (first_op_on_[device] < 0) first_op_on_[device] = id;
    }
    if (stream == kSwapOut && building_ >= 0) last_out_[building_] = id;
    const size_t q = Queue(device, stream);
    if (queues_.size() <= q) queues_.resize(q + 1);
    queues_[q].push_back(id);
    return id;
  }

  // A task's transfers of one kind for one microbatch.
  struct Transfers {
    const Transfer* const* first = nullptr;
    const Transfer* const* last = nullptr;
    const Transfer* const* begin() const { return first; }
    const Transfer* const* end() const { return last; }
    bool empty() const { return first == last; }
    const Transfer* front() const { return *first; }
  };

  // The task's transfers of `kind` for microbatch `mb` (-1: the task's own),
  // from an index built once per task: its transfers ordered by slot
  // (microbatch, kind), in one array with each slot's start.
  Transfers Find(const Task& t, TransferKind kind, int mb) {
    if (index_.size() < g_.tasks.size()) index_.resize(g_.tasks.size());
    TaskIndex& index = index_[t.id];
    if (index.starts.empty()) {
      // Slots by the transfers' microbatch index in the phase (a task of a
      // later pass holds microbatch 1 alone, say), -1 first.
      size_t slots = t.microbatches.size() + 1;
      for (const Transfer& x : t.transfers) {
        slots = std::max(slots, static_cast<size_t>(std::max(x.microbatch, -1) + 2));
      }
      auto slot_of = [](const Transfer& x) {
        return static_cast<size_t>(x.microbatch + 1) * kKinds + static_cast<size_t>(x.kind);
      };
      index.starts.assign(slots * kKinds + 1, 0);
      for (const Transfer& x : t.transfers) {
        if (x.microbatch >= -1) ++index.starts[slot_of(x) + 1];
      }
      for (size_t i = 1; i < index.starts.size(); ++i) index.starts[i] += index.starts[i - 1];
      index.transfers.resize(index.starts.back());
      std::vector<size_t> at(index.starts.begin(), index.starts.end() - 1);
      for (const Transfer& x : t.transfers) {
        if (x.microbatch >= -1) index.transfers[at[slot_of(x)]++] = &x;
      }
    }
    const size_t slot = static_cast<size_t>(mb + 1) * kKinds + static_cast<size_t>(kind);
    if (mb < -1 || slot + 1 >= index.starts.size()) return {};
    const Transfer* const* base = index.transfers.data();
    return {base + index.starts[slot], base + index.starts[slot + 1]};
  }

  static bool Aligned(const Task& a, const Task& b) {
    return a.microbatches.size() == b.microbatches.size() &&
           a.microbatches.front().size == b.microbatches.front().size;
  }

  // The ops of task `producer` that send `kind` to `consumer`, for the
  // consumer's microbatch `mb`: the same microbatch when the two tasks'
  // microbatches align, else those whose samples overlap it (the runtime's
  // mailbox waits for exactly the rows it needs).
  absl::InlinedVector<int, 4> Sends(int producer, TransferKind kind, int consumer, int mb) {
    absl::InlinedVector<int, 4> out;
    const Task& from = g_.tasks[producer];
    const Task& to = g_.tasks[consumer];
    auto it = sends_.find({producer, static_cast<int>(kind), consumer});
    if (it == sends_.end()) return out;
    const SendOps& sent = it->second;
    if (Aligned(from, to)) {
      if (sent.sorted) {  // As Build adds them: a search's simulations ask for each.
        auto first = std::lower_bound(sent.ops.begin(), sent.ops.end(), std::make_pair(mb, -1));
        for (; first != sent.ops.end() && first->first == mb; ++first) out.push_back(first->second);
        return out;
      }
      for (const auto& [m, op] : sent.ops) {
        if (m == mb) out.push_back(op);
      }
      return out;
    }
    const bool known = mb >= 0 && mb < static_cast<int>(to.microbatches.size());
    const int lo = known ? to.microbatches[mb].offset : 0;
    const int hi = known ? lo + to.microbatches[mb].size : 0;
    for (const auto& [m, op] : sent.ops) {
      if (!known || m < 0 || m >= static_cast<int>(from.microbatches.size())) {
        out.push_back(op);
        continue;
      }
      const Microbatch& p = from.microbatches[m];
      if (p.offset < hi && p.offset + p.size > lo) out.push_back(op);
    }
    return out;
  }

  // Records that `op` sends `kind` of microbatch `mb` of task `producer`
  // to task `consumer` (Sends finds it).
  void Sent(int producer, TransferKind kind, int consumer, int mb, int op) {
    SendOps& sent = sends_[{producer, static_cast<int>(kind), consumer}];
    if (!sent.ops.empty() && std::make_pair(mb, op) < sent.ops.back()) sent.sorted = false;
    sent.ops.push_back({mb, op});
  }

  // For each task, per device: the latest task on that device it waits
  // for, directly or not (data it reads, and the tasks before it on its own
  // device); -1 if none.
  std::vector<std::vector<int>> LatestAncestors() const {
    const int n = static_cast<int>(g_.tasks.size());
    std::vector<std::vector<int>> reach(n, std::vector<int>(c_.num_devices, -1));
    std::vector<int> last_on(c_.num_devices, -1);
    auto merge = [&](std::vector<int>& into, const std::vector<int>& from) {
      for (int d = 0; d < c_.num_devices; ++d) into[d] = std::max(into[d], from[d]);
    };
    for (const Task& t : g_.tasks) {
      std::vector<int>& r = reach[t.id];
      for (int dep : t.depends_on) merge(r, reach[dep]);
      if (t.kind == TaskKind::kUpdate) continue;  // Runs on the host.
      if (last_on[t.device] >= 0) merge(r, reach[last_on[t.device]]);
      r[t.device] = t.id;
      last_on[t.device] = t.id;
    }
    return reach;
  }

  // The ops and holds of every task (sim_build.cc).
  void Build();

  // Streams in one flat index: the host's CPU first, then each device's.
  static size_t Queue(int device, Stream stream) {
    return static_cast<size_t>(device + 1) * kNumStreams + stream;
  }

  // Starts every op on its stream (list scheduling; simulator.cc).
  absl::Status Schedule();

  // Sets each device compute's duration from the schedule: its time alone
  // plus (busy - alone) x the devices computing beside it, on average over
  // its span, over the profile's busy neighbours (CostModel::
  // busy_neighbours). False, changing nothing, where no compute's busy and
  // alone times differ (one device, or a profile of one). Clears the
  // schedule.
  bool Reweigh();

  // When a hold's bytes are allocated and freed.
  std::pair<double, double> Span(const Hold& h) const;

  // When a task's last op ends (from task_end_, which Collect fills).
  double TaskEnd(int task) const;

  // Times, busy streams, bytes, memory peaks (simulator.cc).
  SimResult Collect(bool keep_events);

  const CostModel& m_;
  const TaskGraph& g_;
  const Config& c_;
  const ClipSim clip_;
  bool keep_events_ = false;
  double to_device_bw_ = 1, to_host_bw_ = 1, peer_bw_ = 1, transfer_latency_ = 0;
  std::vector<Op> ops_;
  std::vector<std::vector<int>> queues_;  // Op ids per Queue(device, stream).
  // Schedule's view of the graph, made on its first call: each op's queue,
  // and its dependents (op i's from first_dependent_[i], in one array).
  std::vector<size_t> queue_of_;
  std::vector<int> first_dependent_, dependents_;
  // (task, kind, to) -> (microbatch, op) of its sends.
  struct SendOps {
    std::vector<std::pair<int, int>> ops;
    bool sorted = true;  // By (microbatch, op).
  };
  absl::flat_hash_map<std::tuple<int, int, int>, SendOps> sends_;
  static constexpr size_t kKinds = static_cast<size_t>(TransferKind::kKeptIn) + 1;
  struct TaskIndex {
    std::vector<size_t> starts;  // Per slot, then the end.
    std::vector<const Transfer*> transfers;
  };
  std::vector<TaskIndex> index_;  // By task id.
  const std::vector<int> empty_ops_;
  std::vector<int> first_compute_, weight_op_;
  std::vector<int> first_input_;  // A task's last host input of its first microbatch.
  std::map<int, std::vector<int>> device_tasks_;  // Device -> its tasks so far.
  std::vector<std::vector<int>> end_ops_;
  std::vector<double> task_end_;  // Task -> its end, in Collect.
  std::vector<Hold> holds_;
  std::map<int, std::vector<int>> weights_holder_;  // Task -> its weights' holds.
  std::map<int, std::vector<int>> peer_copies_;     // Task -> copies of its weights.
  std::vector<int> first_op_on_;       // Device -> its first op (-1: none yet).
  int building_ = -1;                  // The task Build() is adding ops for.
  std::vector<int> last_out_;          // Task -> its last copy out (-1: none).
  // Per task that sends to the host over its microbatches: each
  // microbatch's compute and its last host send (-1: none), in order
  // (SimResult::host_outputs_pending).
  std::vector<std::vector<std::pair<int, int>>> host_sends_;
  uint64_t largest_host_input_ = 0;  // SimResult::largest_host_input.
  std::vector<int> grads_hold_;        // Task -> its gradients' hold (-1: none).
  std::vector<int> reduce_op_;         // Task -> its vDP gradient reduce (-1: none).
  std::vector<std::vector<int>> computes_;  // Task -> its computes, by microbatch.
};

}  // namespace harmony::planner::sim_internal

#endif  // HARMONY_PLANNER_SIM_SIM_H_
