#include "planner/sim/simulator.h"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace harmony::planner {
namespace {

enum Link { kNoLink = -1, kToDevice = 0, kToHost = 1 };

struct Op {
  int device = 0;  // -1: host CPU.
  Stream stream = kCompute;
  Link link = kNoLink;
  double duration = 0;
  std::vector<int> deps;
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
};

class Sim {
 public:
  Sim(const CostModel& m, const TaskGraph& g) : m_(m), g_(g), c_(g.config) {
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
    return Collect(keep_events);
  }

 private:
  // An op's name, made only when the caller keeps the events (names are
  // most of the allocations of a search's many simulations).
  template <typename F>
  std::string Name(F make) const {
    return keep_events_ ? make() : std::string();
  }

  int Add(int device, Stream stream, Link link, double duration, std::vector<int> deps,
          std::string name) {
    Op op;
    op.device = device;
    op.stream = stream;
    op.link = link;
    // A host transfer's fixed cost holds its stream and the link.
    op.duration = duration + (link != kNoLink ? transfer_latency_ : 0.0);
    op.deps = std::move(deps);
    op.name = std::move(name);
    ops_.push_back(std::move(op));
    const int id = static_cast<int>(ops_.size()) - 1;
    if (device >= 0 && !first_op_on_.count(device)) first_op_on_[device] = id;
    const size_t q = Queue(device, stream);
    if (queues_.size() <= q) queues_.resize(q + 1);
    queues_[q].push_back(id);
    return id;
  }

  // The task's transfers of `kind` for microbatch `mb` (-1: the task's own),
  // from an index built once per task.
  const std::vector<const Transfer*>& Find(const Task& t, TransferKind kind, int mb) {
    auto& index = index_[t.id];
    if (index.empty()) {
      index.resize((t.microbatches.size() + 1) * kKinds);
      for (const Transfer& x : t.transfers) {
        const size_t slot = static_cast<size_t>(x.microbatch + 1) * kKinds +
                            static_cast<size_t>(x.kind);
        if (slot < index.size()) index[slot].push_back(&x);
      }
    }
    const size_t slot = static_cast<size_t>(mb + 1) * kKinds + static_cast<size_t>(kind);
    return slot < index.size() ? index[slot] : empty_;
  }

  static bool Aligned(const Task& a, const Task& b) {
    return a.microbatches.size() == b.microbatches.size() &&
           a.microbatches.front().size == b.microbatches.front().size;
  }

  // The ops of task `producer` that send `kind` to `consumer`, for the
  // consumer's microbatch `mb`: the same microbatch when the two tasks'
  // microbatches align, else those whose samples overlap it (the runtime's
  // mailbox waits for exactly the rows it needs).
  std::vector<int> Sends(int producer, TransferKind kind, int consumer, int mb) {
    std::vector<int> out;
    const Task& from = g_.tasks[producer];
    const Task& to = g_.tasks[consumer];
    const bool aligned = Aligned(from, to);
    auto it = sends_.find({producer, static_cast<int>(kind), consumer});
    if (it == sends_.end()) return out;
    const bool known = mb >= 0 && mb < static_cast<int>(to.microbatches.size());
    const int lo = known ? to.microbatches[mb].offset : 0;
    const int hi = known ? lo + to.microbatches[mb].size : 0;
    for (const auto& [m, op] : it->second) {
      if (aligned) {
        if (m == mb) out.push_back(op);
        continue;
      }
      if (!known || m < 0 || m >= static_cast<int>(from.microbatches.size())) {
        out.push_back(op);
        continue;
      }
      const Microbatch& p = from.microbatches[m];
      if (p.offset < hi && p.offset + p.size > lo) out.push_back(op);
    }
    return out;
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

  void Build() {
    const int n = static_cast<int>(g_.tasks.size());
    first_compute_.assign(n, -1);
    first_input_.assign(n, -1);
    weight_op_.assign(n, -1);
    end_ops_.assign(n, {});
    std::map<int, std::vector<int>> gradients_out;  // Update task -> ops.
    std::map<int, int> kept_for;                     // Task -> who kept its weights.
    for (const Task& t : g_.tasks) {
      for (const Transfer& x : t.transfers) {
        if (x.kind == TransferKind::kKeepResident) kept_for[x.peer_task] = t.id;
      }
    }
    // Collective reductions: pack -> per device last compute.
    std::map<int, std::vector<int>> reduce_waiting;
    // A pack's reduction moves every sender's gradients into device 0 one
    // after another; each participant is held until it is done.
    std::map<int, uint64_t> reduce_bytes;
    for (const Task& t : g_.tasks) {
      if (t.kind != TaskKind::kBackward) continue;
      for (const Transfer* x : Find(t, TransferKind::kGradientReduce, -1)) {
        reduce_bytes[t.pack] += x->bytes;
      }
    }
    const std::vector<std::vector<int>> reach = LatestAncestors();
    for (const Task& t : g_.tasks) {
      const int d = t.device;
      const std::string label = Name([&] {
        return absl::StrCat(TaskKindName(t.kind), " ", t.vlayers.begin, "-", t.vlayers.end - 1);
      });
      if (t.kind == TaskKind::kUpdate) {
        // Across servers the update thread first sums the gradients over
        // the network, then steps (HostStore::Update).
        Add(-1, kCompute, kNoLink,
            m_.ReduceSeconds(t.vlayers.begin, t.vlayers.end) +
                m_.UpdateSeconds(t.vlayers.begin, t.vlayers.end),
            gradients_out[t.id], Name([&] { return label; }));
        continue;
      }
      // Weights: swapped in during the previous task on the device when it
      // prefetches them, i.e. once the task before that one has finished and
      // released its weights (double buffering: two tasks' weights at most).
      const int position = static_cast<int>(device_tasks_[d].size());
      device_tasks_[d].push_back(t.id);
      // Copied from another device (vDP peer weights): once the source has
      // swapped them in; the source holds its copy until every copy is done
      // and swaps nothing into that place before.
      auto slot_deps = [&](int task) {
        std::vector<int> deps = end_ops_[task];
        auto copies = peer_copies_.find(task);
        if (copies != peer_copies_.end()) {
          deps.insert(deps.end(), copies->second.begin(), copies->second.end());
        }
        return deps;
      };
      for (const Transfer* w : Find(t, TransferKind::kWeightsIn, -1)) {
        std::vector<int> deps;
        if (w->peer_task >= 0 && position >= 2) {
          deps = slot_deps(device_tasks_[d][position - 2]);
        } else if (w->peer_task < 0 && position >= 1) {
          // Not prefetched: after the previous task.
          deps = slot_deps(device_tasks_[d][position - 1]);
        }
        int op;
        if (w->channel == Channel::kPeer) {
          const int source = device_tasks_.at(w->peer_device).at(position);
          deps.push_back(weight_op_[source]);
          op = Add(d, kWeightsIn, kNoLink, w->bytes / peer_bw_, deps,
                   Name([&] { return absl::StrCat("weights from device ", w->peer_device, " ",
                                                  label); }));
          peer_copies_[source].push_back(op);
          for (int h : weights_holder_[source]) holds_[h].until_also.push_back(op);
        } else {
          op = Add(d, kWeightsIn, kToDevice, w->bytes / to_device_bw_, deps,
                   Name([&] { return absl::StrCat("weights in ", label); }));
        }
        weight_op_[t.id] = op;
        const int during = w->peer_task >= 0 ? first_compute_[w->peer_task] : -1;
        holds_.push_back({d, w->bytes, op, -(t.id + 1), during});
        weights_holder_[t.id].push_back(static_cast<int>(holds_.size()) - 1);
      }
      if (weight_op_[t.id] < 0 && kept_for.count(t.id)) {
        // Kept resident by the previous task on the device: extend its hold.
        auto it = weights_holder_.find(kept_for[t.id]);
        if (it != weights_holder_.end()) {
          for (int h : it->second) holds_[h].until_op = -(t.id + 1);
          weights_holder_[t.id] = it->second;
        }
      }
      // Tasks on a device run one after another, as the runtime runs them.
      const std::vector<int> after_all =
          position >= 1 ? end_ops_[device_tasks_[d][position - 1]] : std::vector<int>{};
      // Only the task's first op on each stream waits for them: the stream
      // runs the rest after it (a task ends with an op per microbatch, so
      // listing them on every op made the graph quadratic).
      const std::vector<int> none;
      bool swap_in_waited = false, compute_waited = false;
      auto after_for = [&](bool& waited) -> const std::vector<int>& {
        if (waited) return none;
        waited = true;
        return after_all;
      };
      int last_compute = -1;
      // A pack summed on the host sends its gradients out after each
      // microbatch but the last (Config::host_sums).
      const bool host_summed = SumsGradientsOnHost(t);
      int summed_out = -1;
      for (const Microbatch& mb : t.microbatches) {
        std::vector<int> inputs;
        uint64_t in_bytes = 0;
        struct PeerIn {
          uint64_t bytes;
          int send_op;
          int early_op;
        };
        std::vector<PeerIn> pending_peer;
        int first_in = -1;
        // What tasks on this device computed for this one: each held from
        // its sender's compute (from its end when a backward made it:
        // gradients of the inputs appear at the end, inside that compute's
        // working set).
        struct LocalIn {
          uint64_t bytes;
          int send_op;
          bool from_end;
        };
        std::vector<LocalIn> locals;
        for (const Transfer* x : Find(t, TransferKind::kDataIn, mb.index)) {
          const int op = Add(d, kSwapIn, kToDevice, x->bytes / to_device_bw_,
                             after_for(swap_in_waited),
                             Name([&] { return absl::StrCat("data in ", label, " #", mb.index); }));
          inputs.push_back(op);
          in_bytes += x->bytes;
          if (first_in < 0) first_in = op;
        }
        for (TransferKind kind : {TransferKind::kActivationsIn, TransferKind::kStashIn}) {
          const TransferKind send = kind == TransferKind::kActivationsIn
                                        ? TransferKind::kActivationsOut
                                        : TransferKind::kStashOut;
          for (const Transfer* x : Find(t, kind, mb.index)) {
            std::vector<int> from = Sends(x->peer_task, send, t.id, mb.index);
            if (x->channel == Channel::kPeer) {
              // The sender copies into this device when it has computed:
              // in the runtime that can be as soon as this device has
              // finished the last task the sender depends on, however far
              // ahead of this simulation the sender runs. Held from then.
              inputs.insert(inputs.end(), from.begin(), from.end());
              const int q = reach[x->peer_task][d];
              const auto first = first_op_on_.find(d);  // None yet: from the send.
              const int early = q >= 0 && !end_ops_[q].empty() ? end_ops_[q].front()
                                : first != first_op_on_.end() ? first->second
                                                              : -1;
              pending_peer.push_back({x->bytes, from.empty() ? -1 : from.front(), early});
              continue;
            }
            if (x->channel == Channel::kLocal) {
              inputs.insert(inputs.end(), from.begin(), from.end());
              locals.push_back({x->bytes, from.empty() ? -1 : from.front(),
                                g_.tasks[x->peer_task].kind == TaskKind::kBackward});
              continue;
            }
            in_bytes += x->bytes;
            std::vector<int> deps = from;
            const std::vector<int>& after = after_for(swap_in_waited);
            deps.insert(deps.end(), after.begin(), after.end());
            const int op = Add(d, kSwapIn, kToDevice, x->bytes / to_device_bw_, deps,
                               Name([&] { return absl::StrCat(kind == TransferKind::kStashIn ? "stash in "
                                                                           : "activations in ",
                                            label, " #", mb.index); }));
            inputs.push_back(op);
            if (first_in < 0) first_in = op;
          }
        }
        std::vector<int> deps = inputs;
        const std::vector<int>& after = after_for(compute_waited);
        deps.insert(deps.end(), after.begin(), after.end());
        if (weight_op_[t.id] >= 0) deps.push_back(weight_op_[t.id]);
        // Summed on the host: the previous microbatch's gradients have left.
        if (summed_out >= 0) deps.push_back(summed_out);
        const double seconds =
            t.kind == TaskKind::kForward
                ? m_.ForwardSeconds(t.vlayers.begin, t.vlayers.end, mb.size)
                : m_.BackwardSeconds(t.vlayers.begin, t.vlayers.end, mb.size);
        const int compute = Add(d, kCompute, kNoLink, seconds, deps,
                                Name([&] { return absl::StrCat(label, " #", mb.index); }));
        if (first_compute_[t.id] < 0) {
          first_compute_[t.id] = compute;
          for (int op : inputs) {
            if (ops_[op].device == d && ops_[op].stream == kSwapIn) first_input_[t.id] = op;
          }
        }
        last_compute = compute;
        end_ops_[t.id].push_back(compute);
        if (in_bytes > 0) holds_.push_back({d, in_bytes, first_in >= 0 ? first_in : compute, compute});
        for (const LocalIn& l : locals) {
          if (l.bytes == 0) continue;
          holds_.push_back({d, l.bytes, l.send_op >= 0 ? l.send_op : compute, compute, -1, -1,
                            l.send_op >= 0 && l.from_end});
        }
        for (const PeerIn& p : pending_peer) {
          holds_.push_back({d, p.bytes, p.send_op >= 0 ? p.send_op : compute, compute, p.early_op});
        }
        // Working set while computing, beyond the weights, gradients and
        // inputs held above (the targets of a fused loss are in its inputs).
        const int u = mb.size;
        uint64_t working = 0;
        if (t.kind == TaskKind::kForward) {
          working = m_.ForwardWorkingBytes(t.vlayers.begin, t.vlayers.end, u);
        } else {
          // As from the second microbatch on, with the gradients allocated
          // (held below): a first microbatch, whose backward makes them as
          // it goes, needs less. (Holding them only from the end of the
          // first microbatch, with BackwardWorkingBytes(first = true) before,
          // matched the GPT of issue 17 within 5% but fell 12% short of the
          // runtime's peak on runtime_test's small models. Part of that was
          // the runtime holding every output of a pack until its backward
          // ended (fixed); with that fixed, GPipe's one-microbatch tasks still
          // went 1-10% over their planned peaks in 10 of 16 loaded test runs,
          // against none with this model. So a task's gradients are counted
          // from its start, with the transient of accumulating into them.)
          working = m_.BackwardWorkingBytes(t.vlayers.begin, t.vlayers.end, u, host_summed);
          // Summed on the host, each microbatch makes its gradients as the
          // first does; held below when the profile's first peaks do not.
          if (host_summed && !m_.first_working_has_gradients()) {
            working += m_.GradientBytes(t.vlayers.begin, t.vlayers.end);
          }
          const uint64_t targets = t.fused_loss ? m_.TargetBytes(u) : 0;
          working = working > targets ? working - targets : 0;
        }
        holds_.push_back({d, working, compute, compute});
        if (host_summed) {
          // This microbatch's gradients, from the end of its compute until
          // they are on the host (the last microbatch's go with the task's
          // gradients out, below); the next microbatch waits for them.
          summed_out = -1;
          for (const Transfer* x : Find(t, TransferKind::kGradientsOut, mb.index)) {
            summed_out = Add(d, kSwapOut, kToHost, x->bytes / to_host_bw_, {compute},
                             Name([&] { return absl::StrCat("gradients out ", label, " #",
                                                            mb.index); }));
            gradients_out[x->peer_task].push_back(summed_out);
            holds_.push_back({d, x->bytes, compute, summed_out, -1, -1, true});
          }
        }
        // Outputs.
        uint64_t out_bytes = 0;
        int last_out = compute;
        for (TransferKind kind : {TransferKind::kActivationsOut, TransferKind::kStashOut}) {
          for (const Transfer* x : Find(t, kind, mb.index)) {
            if (x->channel == Channel::kLocal) {  // Stays: nothing to copy.
              sends_[{t.id, static_cast<int>(kind), x->peer_task}].push_back(
                  {mb.index, compute});
              continue;
            }
            int op;
            if (x->channel == Channel::kPeer) {
              op = Add(d, kPeer, kNoLink, x->bytes / peer_bw_, {compute},
                       Name([&] { return absl::StrCat("to device ", x->peer_device, " ", label, " #",
                                    mb.index); }));
            } else {
              op = Add(d, kSwapOut, kToHost, x->bytes / to_host_bw_, {compute},
                       Name([&] { return absl::StrCat(kind == TransferKind::kStashOut ? "stash out "
                                                                    : "activations out ",
                                    label, " #", mb.index); }));
            }
            sends_[{t.id, static_cast<int>(kind), x->peer_task}].push_back({mb.index, op});
            out_bytes += x->bytes;
            // The compute thread copies to a peer itself; what goes to the
            // host leaves on the copy-out stream while the device goes on.
            if (x->channel == Channel::kPeer) end_ops_[t.id].push_back(op);
            last_out = op;
          }
        }
        // A backward's outputs (the gradients of its inputs) appear at its
        // end, inside its working set until then.
        if (out_bytes > 0) {
          holds_.push_back({d, out_bytes, compute, last_out, -1, -1,
                            t.kind == TaskKind::kBackward});
        }
      }
      for (const Transfer* x : Find(t, TransferKind::kBuffersOut, -1)) {
        Add(d, kSwapOut, kToHost, x->bytes / to_host_bw_, {last_compute},
            Name([&] { return absl::StrCat("buffers out ", label); }));
      }
      if (t.kind != TaskKind::kBackward) continue;
      const uint64_t grads = m_.GradientBytes(t.vlayers.begin, t.vlayers.end);
      int grads_free = last_compute;
      int reduce = -1;
      if (!Find(t, TransferKind::kGradientReduce, -1).empty()) {  // One per task.
        reduce = Add(d, kPeer, kNoLink, reduce_bytes[t.pack] / peer_bw_, {last_compute},
                     Name([&] { return absl::StrCat("reduce ", label); }));
        reduce_waiting[t.pack].push_back(reduce);
        // A receive buffer: the runtime sums one parameter's copy at a time;
        // a vLayer's gradients bound it.
        uint64_t largest = 0;
        for (int l = t.vlayers.begin; l < t.vlayers.end; ++l) {
          largest = std::max(largest, m_.GradientBytes(l, l + 1));
        }
        holds_.push_back({d, largest, reduce, reduce});
        grads_free = reduce;
        end_ops_[t.id].push_back(reduce);
      }
      for (const Transfer* x : Find(t, TransferKind::kGradientsOut, -1)) {
        std::vector<int> deps = {last_compute};
        if (reduce >= 0) deps.push_back(reduce);
        const int op = Add(d, kSwapOut, kToHost, x->bytes / to_host_bw_, deps,
                           Name([&] { return absl::StrCat("gradients out ", label); }));
        gradients_out[x->peer_task].push_back(op);
        grads_free = op;
        // Summed on the host, they leave on the compute thread: the device's
        // next task starts once they are out.
        if (host_summed) end_ops_[t.id].push_back(op);
      }
      if (host_summed) {
        // The last microbatch's, from the end of its compute.
        holds_.push_back({d, grads, last_compute, grads_free, -1, -1, true});
      } else {
        holds_.push_back({d, grads, first_compute_[t.id], grads_free, -1, position});
      }
    }
    // A reduction starts when every device has its gradients.
    for (const auto& [pack, ops] : reduce_waiting) {
      std::vector<int> computes;
      for (int op : ops) computes.push_back(ops_[op].deps.front());
      for (int op : ops) {
        for (int c : computes) {
          if (std::find(ops_[op].deps.begin(), ops_[op].deps.end(), c) == ops_[op].deps.end()) {
            ops_[op].deps.push_back(c);
          }
        }
      }
    }
  }

  // Streams in one flat index: the host's CPU first, then each device's.
  static size_t Queue(int device, Stream stream) {
    return static_cast<size_t>(device + 1) * kNumStreams + stream;
  }

  // List scheduling: repeatedly start, among the operations at the head of
  // their stream whose dependencies are done, the one that can start first
  // (the lowest id among equals). The candidates wait in a heap by the start
  // they had when offered; starts only grow (streams and the link only get
  // busier), so one popped with a stale start is offered again at its
  // current one, and one popped with its current start is the earliest.
  absl::Status Schedule() {
    const size_t nq = queues_.size();
    std::vector<size_t> head(nq, 0);
    std::vector<double> stream_free(nq, 0.0);
    double link_free[2] = {0, 0};
    std::vector<size_t> queue_of(ops_.size(), 0);
    for (size_t q = 0; q < nq; ++q) {
      for (int id : queues_[q]) queue_of[id] = q;
    }
    // Unscheduled dependencies of each op, and the ops waiting on each.
    std::vector<int> waiting(ops_.size(), 0);
    std::vector<std::vector<int>> dependents(ops_.size());
    for (size_t id = 0; id < ops_.size(); ++id) {
      waiting[id] = static_cast<int>(ops_[id].deps.size());
      for (int dep : ops_[id].deps) dependents[dep].push_back(static_cast<int>(id));
    }
    // The latest end among each op's scheduled dependencies (all of them
    // once it is offered).
    std::vector<double> deps_end(ops_.size(), 0.0);
    auto start_of = [&](int id) {
      const Op& op = ops_[id];
      double start = std::max(stream_free[queue_of[id]], deps_end[id]);
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
      for (int w : dependents[id]) {
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

  // When a hold's bytes are allocated and freed.
  std::pair<double, double> Span(const Hold& h) const {
    double from = h.from_end ? ops_[h.from_op].end : ops_[h.from_op].start;
    if (h.or_from_op >= 0) from = std::min(from, ops_[h.or_from_op].start);
    double until = h.until_op < 0 ? TaskEnd(-h.until_op - 1) : ops_[h.until_op].end;
    for (int op : h.until_also) until = std::max(until, ops_[op].end);
    if (h.at_least_past_position >= 0) {
      const std::vector<int>& list = device_tasks_.at(h.device);
      const size_t next = static_cast<size_t>(h.at_least_past_position) + 1;
      if (next < list.size()) until = std::max(until, TaskEnd(list[next]));
    }
    return {from, std::max(from, until)};
  }

  double TaskEnd(int task) const {
    double end = 0;
    for (int op : end_ops_[task]) end = std::max(end, ops_[op].end);
    return end;
  }

  SimResult Collect(bool keep_events) {
    SimResult r;
    r.busy.assign(c_.num_devices, {});
    for (const Op& op : ops_) {
      r.iteration_s = std::max(r.iteration_s, op.end);
      if (op.device < 0) {
        r.optimizer_busy_s += op.duration;
      } else {
        r.busy[op.device][op.stream] += op.duration;
      }
      if (keep_events) {
        r.events.push_back({op.name, op.device, op.stream, op.start, op.end});
      }
    }
    // Memory: sweep allocation and free events per device (frees first at
    // equal times).
    std::vector<std::vector<std::pair<double, int64_t>>> events(c_.num_devices);
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
        r.device_peak[d] = std::max<uint64_t>(r.device_peak[d], now);
      }
      if (r.device_peak[d] > c_.device_memory) r.fits = false;
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
    r.host_memory = m_.WeightBytes(0, layers) + m_.GradientBytes(0, layers) +
                    (net.shard_optimizer_state ? (state + net.servers - 1) / net.servers : state) +
                    stash + r.swap.activations_out;
    r.network_bytes = m_.ReduceBytesPerServer(0, layers);
    r.iteration_s += m_.IterationSyncSeconds();
    return r;
  }

  const CostModel& m_;
  const TaskGraph& g_;
  const Config& c_;
  bool keep_events_ = false;
  double to_device_bw_ = 1, to_host_bw_ = 1, peer_bw_ = 1, transfer_latency_ = 0;
  std::vector<Op> ops_;
  std::vector<std::vector<int>> queues_;  // Op ids per Queue(device, stream).
  // (task, kind, to) -> (microbatch, op) of its sends.
  std::map<std::tuple<int, int, int>, std::vector<std::pair<int, int>>> sends_;
  static constexpr size_t kKinds = 11;  // TransferKind values.
  std::map<int, std::vector<std::vector<const Transfer*>>> index_;
  const std::vector<const Transfer*> empty_;
  std::vector<int> first_compute_, weight_op_;
  std::vector<int> first_input_;  // A task's last host input of its first microbatch.
  std::map<int, std::vector<int>> device_tasks_;  // Device -> its tasks so far.
  std::vector<std::vector<int>> end_ops_;
  std::vector<Hold> holds_;
  std::map<int, std::vector<int>> weights_holder_;  // Task -> its weights' holds.
  std::map<int, std::vector<int>> peer_copies_;     // Task -> copies of its weights.
  std::map<int, int> first_op_on_;     // Device -> its first op.
};

}  // namespace

absl::StatusOr<SimResult> Simulate(const CostModel& model, const TaskGraph& graph,
                                   bool keep_events) {
  Sim sim(model, graph);
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
