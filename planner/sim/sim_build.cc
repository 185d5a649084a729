// Sim::Build (sim.h): the operations and memory holds of every task of the
// graph, as the runtime runs them (see simulator.h for the machine).

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "planner/sim/sim.h"

namespace harmony::planner::sim_internal {

void Sim::Build() {
  const int n = static_cast<int>(g_.tasks.size());
  first_compute_.assign(n, -1);
  first_input_.assign(n, -1);
  weight_op_.assign(n, -1);
  end_ops_.assign(n, {});
  last_out_.assign(n, -1);
  grads_hold_.assign(n, -1);
  reduce_op_.assign(n, -1);
  computes_.assign(n, {});
  // About an op and a hold per transfer and two per computed microbatch.
  size_t expected = 0;
  for (const Task& t : g_.tasks) expected += t.transfers.size() + 2 * t.microbatches.size() + 2;
  ops_.reserve(expected);
  holds_.reserve(expected);
  std::map<int, std::vector<int>> gradients_out;  // Update task -> ops.
  std::map<int, int> kept_for;                     // Task -> who kept its weights.
  for (const Task& t : g_.tasks) {
    for (const Transfer& x : t.transfers) {
      if (x.kind == TransferKind::kKeepResident) kept_for[x.peer_task] = t.id;
    }
  }
  // Collective reductions, by the task that sums (device 0's; one per pack
  // and wave): per device last compute.
  std::map<int, std::vector<int>> reduce_waiting;
  auto summed_by = [](const Task& t, const Transfer& x) {
    return x.peer_task >= 0 ? x.peer_task : t.id;
  };
  // A reduction moves every sender's gradients into device 0 one after
  // another; each participant is held until it is done.
  std::map<int, uint64_t> reduce_bytes;
  for (const Task& t : g_.tasks) {
    if (t.kind != TaskKind::kBackward) continue;
    for (const Transfer* x : Find(t, TransferKind::kGradientReduce, -1)) {
      reduce_bytes[summed_by(t, *x)] += x->bytes;
    }
  }
  const std::vector<std::vector<int>> reach = LatestAncestors();
  // Clipping (ClipSim): the update ops, the last update task, the seconds
  // of each update's copy (to restore it) and of its step.
  std::vector<int> update_ops;
  std::vector<double> copy_s, step_s;
  int last_update = -1;
  for (const Task& t : g_.tasks) {
    if (t.kind == TaskKind::kUpdate) last_update = t.id;
  }
  for (const Task& t : g_.tasks) {
    const int d = t.device;
    building_ = t.id;
    const std::string label = Name([&] {
      return absl::StrCat(TaskKindName(t.kind), " ", t.vlayers.begin, "-", t.vlayers.end - 1);
    });
    if (t.kind == TaskKind::kUpdate) {
      // Across servers the update thread first sums the gradients over
      // the network, then steps (HostStore::Update).
      const double step = m_.UpdateSeconds(t.vlayers.begin, t.vlayers.end);
      double extra = 0;
      if (clip_ != ClipSim::kOff) {
        const double p = static_cast<double>(m_.WeightBytes(t.vlayers.begin, t.vlayers.end) -
                                             m_.BufferBytes(t.vlayers.begin, t.vlayers.end));
        const double s = static_cast<double>(m_.OptimizerStateBytes(t.vlayers.begin,
                                                                    t.vlayers.end));
        const double g = static_cast<double>(m_.GradientBytes(t.vlayers.begin, t.vlayers.end));
        const double touched = std::max(1.0, 2 * (p + s) + g);
        const double copy = step * 2 * (p + s) / touched;
        extra = step * g / touched;  // The norm.
        const bool speculated = clip_ != ClipSim::kHold && t.id != last_update;
        if (speculated) {
          extra += copy;
          copy_s.push_back(copy);
          step_s.push_back(step);
        }
      }
      update_ops.push_back(Add(-1, kCompute, kNoLink,
                               m_.ReduceSeconds(t.vlayers.begin, t.vlayers.end) + step + extra,
                               gradients_out[t.id], Name([&] { return label; })));
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
    // A prefetch also waits for what the task two before copies out (the
    // runtime's LoadWeights): its buffer takes the room of that task's
    // gradients, counted as the larger of the two.
    bool prefetched = false;
    for (const Transfer* w : Find(t, TransferKind::kWeightsIn, -1)) {
      prefetched = prefetched || w->peer_task >= 0;
    }
    const int before_last = position >= 2 && prefetched ? device_tasks_[d][position - 2] : -1;
    uint64_t room = before_last >= 0 && grads_hold_[before_last] >= 0
                        ? holds_[grads_hold_[before_last]].bytes
                        : 0;
    for (const Transfer* w : Find(t, TransferKind::kWeightsIn, -1)) {
      std::vector<int> deps;
      if (w->peer_task >= 0 && position >= 2) {
        deps = slot_deps(device_tasks_[d][position - 2]);
        if (last_out_[before_last] >= 0) deps.push_back(last_out_[before_last]);
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
        // The runtime copies them one vLayer at a time (LoadWeights), each
        // a host transfer with its fixed cost.
        int crossings = 0;
        for (int k = t.vlayers.begin; k < t.vlayers.end; ++k) {
          crossings += m_.WeightBytes(k, k + 1) > 0 ? 1 : 0;
        }
        op = Add(d, kWeightsIn, kToDevice,
                 w->bytes / to_device_bw_ + transfer_latency_ * std::max(0, crossings - 1), deps,
                 Name([&] { return absl::StrCat("weights in ", label); }));
      }
      weight_op_[t.id] = op;
      const int during = w->peer_task >= 0 ? first_compute_[w->peer_task] : -1;
      const uint64_t in_room = w->peer_task >= 0 ? std::min(room, w->bytes) : 0;
      room -= in_room;
      Hold h{d, w->bytes - in_room, op, -(t.id + 1), during};
      h.or_from_after_op = before_last >= 0 ? last_out_[before_last] : -1;
      holds_.push_back(h);
      weights_holder_[t.id].push_back(static_cast<int>(holds_.size()) - 1);
      if (in_room > 0) {
        Hold r{d, in_room, op, -(t.id + 1)};
        r.after_hold = grads_hold_[before_last];
        holds_.push_back(r);
        weights_holder_[t.id].push_back(static_cast<int>(holds_.size()) - 1);
      }
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
    // The compute also waits until the devices copying the previous task's
    // weights (vDP peer weights) have them: the runtime frees them first.
    const std::vector<int> compute_after =
        position >= 1 ? slot_deps(device_tasks_[d][position - 1]) : std::vector<int>{};
    // Host inputs copy in once the previous task has computed, while its
    // gradients are reduced (the runtime starts them before the reduce's
    // wait for the other devices; their bytes are held from then).
    std::vector<int> inputs_after = after_all;
    const int previous = position >= 1 ? device_tasks_[d][position - 1] : -1;
    if (previous >= 0) {
      const int reduce = reduce_op_[previous];
      inputs_after.erase(std::remove(inputs_after.begin(), inputs_after.end(), reduce),
                         inputs_after.end());
    }
    // After a backward that reduces (vDP), a backward that keeps nothing
    // has its first Config::InputsAhead() microbatches' host inputs copied
    // in during that backward's last microbatches, so that ahead of
    // computing there are as many as within a task (the runtime's
    // TaskInputs::Follow): microbatch j's once the previous task has
    // computed its microbatch n - ahead - 1 + j (from its first), and what
    // the task before that copied out has left.
    int early_after = -1;
    const bool early = previous >= 0 && reduce_op_[previous] >= 0 &&
                       t.kind == TaskKind::kBackward && !g_.config.Keeps(t.pack) &&
                       computes_[previous].size() >= 2;
    if (early && position >= 2) early_after = last_out_[device_tasks_[d][position - 2]];
    auto after_computed = [&](int j) {  // The previous task's microbatch, from 0.
      const int n_before = static_cast<int>(computes_[previous].size());
      return std::max(n_before + j - g_.config.InputsAhead() - 1, 0);
    };
    auto early_deps = [&](int j) -> std::vector<int> {
      std::vector<int> deps = {computes_[previous][after_computed(j)]};
      if (early_after >= 0) deps.push_back(early_after);
      return deps;
    };
    auto is_early = [&](int j) { return early && j < g_.config.InputsAhead(); };
    // Only the task's first op on each stream waits for them: the stream
    // runs the rest after it (a task ends with an op per microbatch, so
    // listing them on every op made the graph quadratic).
    const std::vector<int> none;
    bool swap_in_waited = false, compute_waited = false;
    auto after_for = [&](bool& waited) -> const std::vector<int>& {
      if (waited) return none;
      waited = true;
      return &waited == &swap_in_waited ? inputs_after : compute_after;
    };
    // What a host input of the microbatch at `place` waits for, onto `deps`.
    auto inputs_wait = [&](int place, Deps& deps) {
      if (is_early(place)) {
        const std::vector<int> early = early_deps(place);
        deps.insert(deps.end(), early.begin(), early.end());
      } else {
        const std::vector<int>& after = after_for(swap_in_waited);
        deps.insert(deps.end(), after.begin(), after.end());
      }
    };
    int last_compute = -1;
    // A pack summed on the host sends its gradients out after each
    // microbatch but the last (Config::host_sums).
    const bool host_summed = SumsGradientsOnHost(t);
    int summed_out = -1;
    // Kept activations' copies out per microbatch: the runtime computes
    // microbatch m + 2 once microbatch m's have left.
    std::map<int, std::vector<int>> kept_out;
    // The runtime copies a microbatch's host inputs in at most
    // Config::InputsAhead() microbatches ahead of the one computing:
    // microbatch m's once microbatch m - ahead - 1 has computed.
    std::vector<int>& computed = computes_[t.id];
    // What microbatches sent to the host: with a bound on those pending
    // (Config::host_outputs_pending), microbatch m computes once microbatch
    // m - N's have left.
    std::vector<std::vector<int>> host_out;  // By the microbatch's place in the task.
    const int pending = g_.config.host_outputs_pending;
    std::vector<std::pair<int, int>> sent;   // Compute, last host send.
    // Holds of sends to the host that the runtime has freed before the
    // compute of the microbatch at this place (host_outputs_pending) or of
    // this index (kept activations) starts.
    std::map<int, std::vector<int>> freed_by_place, freed_by_index;
    bool any_sent = false;
    for (const Microbatch& mb : t.microbatches) {
      const int place = static_cast<int>(host_out.size());
      host_out.emplace_back();
      Deps ahead;
      const int behind = mb.index - g_.config.InputsAhead() - 1;
      if (behind >= 0 && behind < static_cast<int>(computed.size())) {
        ahead.push_back(computed[behind]);
      }
      Deps inputs;
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
        Deps deps;
        inputs_wait(place, deps);
        deps.insert(deps.end(), ahead.begin(), ahead.end());
        const int op = Add(d, kSwapIn, kToDevice, x->bytes / to_device_bw_, deps,
                           Name([&] { return absl::StrCat("data in ", label, " #", mb.index); }));
        inputs.push_back(op);
        in_bytes += x->bytes;
        if (first_in < 0) first_in = op;
      }
      for (TransferKind kind :
           {TransferKind::kActivationsIn, TransferKind::kStashIn, TransferKind::kKeptIn}) {
        const TransferKind send = kind == TransferKind::kActivationsIn ? TransferKind::kActivationsOut
                                  : kind == TransferKind::kStashIn     ? TransferKind::kStashOut
                                                                       : TransferKind::kKeptOut;
        for (const Transfer* x : Find(t, kind, mb.index)) {
          const absl::InlinedVector<int, 4> from = Sends(x->peer_task, send, t.id, mb.index);
          if (x->channel == Channel::kPeer) {
            // The sender copies into this device when it has computed:
            // in the runtime that can be as soon as this device has
            // finished the last task the sender depends on, however far
            // ahead of this simulation the sender runs. Held from then.
            inputs.insert(inputs.end(), from.begin(), from.end());
            const int q = reach[x->peer_task][d];
            // None yet on this device: from the send.
            const int first = d < static_cast<int>(first_op_on_.size()) ? first_op_on_[d] : -1;
            const int early = q >= 0 && !end_ops_[q].empty() ? end_ops_[q].front() : first;
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
          Deps deps(from.begin(), from.end());
          inputs_wait(place, deps);
          deps.insert(deps.end(), ahead.begin(), ahead.end());
          const int op = Add(d, kSwapIn, kToDevice, x->bytes / to_device_bw_, deps,
                             Name([&] { return absl::StrCat(kind == TransferKind::kStashIn ? "stash in "
                                                            : kind == TransferKind::kKeptIn ? "kept in "
                                                                         : "activations in ",
                                          label, " #", mb.index); }));
          inputs.push_back(op);
          if (first_in < 0) first_in = op;
        }
      }
      Deps deps = inputs;
      const std::vector<int>& after = after_for(compute_waited);
      deps.insert(deps.end(), after.begin(), after.end());
      if (weight_op_[t.id] >= 0) deps.push_back(weight_op_[t.id]);
      // Summed on the host: the previous microbatch's gradients have left.
      if (summed_out >= 0) deps.push_back(summed_out);
      if (auto k = kept_out.find(mb.index - 2); k != kept_out.end()) {
        deps.insert(deps.end(), k->second.begin(), k->second.end());
      }
      if (pending > 0 && place >= pending) {
        deps.insert(deps.end(), host_out[place - pending].begin(), host_out[place - pending].end());
      }
      const bool kept = t.kind == TaskKind::kBackward && g_.config.Keeps(t.pack);
      auto seconds = [&](bool alone) {
        const int begin = t.vlayers.begin, end = t.vlayers.end;
        return t.kind == TaskKind::kForward ? m_.ForwardSeconds(begin, end, mb.size, alone)
               : kept ? m_.KeptBackwardSeconds(begin, end, mb.size, alone)
                      : m_.BackwardSeconds(begin, end, mb.size, alone);
      };
      const int compute = Add(d, kCompute, kNoLink, seconds(false), deps,
                              Name([&] { return absl::StrCat(label, " #", mb.index); }));
      ops_[compute].busy = ops_[compute].duration;
      ops_[compute].lead = m_.StepHandoffSeconds(mb.size);
      auto held_until_now = [&](const std::map<int, std::vector<int>>& freed, int key) {
        auto it = freed.find(key);
        if (it == freed.end()) return;
        for (int h : it->second) holds_[h].until_start_of = compute;
      };
      held_until_now(freed_by_place, place);
      held_until_now(freed_by_index, mb.index);
      ops_[compute].alone = seconds(true);
      if (first_compute_[t.id] < 0) {
        first_compute_[t.id] = compute;
        for (int op : inputs) {
          if (ops_[op].device == d && ops_[op].stream == kSwapIn) first_input_[t.id] = op;
        }
      }
      last_compute = compute;
      computed.push_back(compute);
      end_ops_[t.id].push_back(compute);
      if (in_bytes > 0) {
        Hold h{d, in_bytes, first_in >= 0 ? first_in : compute, compute};
        if (is_early(place)) {
          // Allocated as soon as the runtime may post them (before the
          // previous task's next compute), however late the copy begins.
          h.or_from_op = computes_[previous][after_computed(place) + 1];
          h.or_from_after_op = early_after;
        }
        holds_.push_back(h);
      }
      largest_host_input_ = std::max(largest_host_input_, in_bytes);
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
        // matched the bench's 34 MiB GPT within 5% but fell 12% short of the
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
        // Kept: the saved activations came in with the inputs (held above)
        // beside the recompute's working set, which counts them again: an
        // upper bound (subtracting them fell 3% short of the runtime's peak
        // on runtime_test's GPT, whose kept storages are many small ones,
        // all held until the microbatch's backward ends). And every fresh
        // gradient of the pack at once: the runtime's kept backward
        // (KeptBackward) takes them all from the engine, then adds them into
        // the accumulated ones (without them, torchvision efficientnet_b0's
        // kept vPP pack of 7.56 MiB of weights planned a peak of 18.56 MiB
        // and ran out of 24.17 MiB).
        if (kept) working += m_.GradientBytes(t.vlayers.begin, t.vlayers.end);
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
      // Outputs: to peers (copied by the compute thread), to the host
      // (bounded per task: host_outputs_pending), kept (bounded: two on).
      uint64_t out_bytes = 0, host_bytes = 0, kept_bytes = 0;
      int last_out = compute, last_host = compute, last_kept = compute;
      for (TransferKind kind :
           {TransferKind::kActivationsOut, TransferKind::kStashOut, TransferKind::kKeptOut}) {
        for (const Transfer* x : Find(t, kind, mb.index)) {
          if (x->channel == Channel::kLocal) {  // Stays: nothing to copy.
            Sent(t.id, kind, x->peer_task, mb.index, compute);
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
                                                    : kind == TransferKind::kKeptOut ? "kept out "
                                                                  : "activations out ",
                                  label, " #", mb.index); }));
          }
          Sent(t.id, kind, x->peer_task, mb.index, op);
          if (kind == TransferKind::kKeptOut) kept_out[mb.index].push_back(op);
          if (x->channel == Channel::kHost && kind != TransferKind::kKeptOut) {
            host_out[place].push_back(op);  // (Kept ones have their own bound.)
          }
          // The compute thread copies to a peer itself; what goes to the
          // host leaves on the copy-out stream while the device goes on.
          if (x->channel == Channel::kPeer) {
            end_ops_[t.id].push_back(op);
            out_bytes += x->bytes;
            last_out = op;
          } else if (kind == TransferKind::kKeptOut) {
            kept_bytes += x->bytes;
            last_kept = op;
          } else {
            host_bytes += x->bytes;
            last_host = op;
          }
        }
      }
      sent.push_back({compute, host_out[place].empty() ? -1 : host_out[place].back()});
      any_sent = any_sent || !host_out[place].empty();
      // A backward's outputs (the gradients of its inputs) appear at its
      // end, inside its working set until then.
      const bool from_end = t.kind == TaskKind::kBackward;
      if (out_bytes > 0) holds_.push_back({d, out_bytes, compute, last_out, -1, -1, from_end});
      if (host_bytes > 0) {
        holds_.push_back({d, host_bytes, compute, last_host, -1, -1, from_end});
        const int h = static_cast<int>(holds_.size()) - 1;
        if (pending > 0) freed_by_place[place + pending].push_back(h);
      }
      if (kept_bytes > 0) {
        holds_.push_back({d, kept_bytes, compute, last_kept, -1, -1, from_end});
        freed_by_index[mb.index + 2].push_back(static_cast<int>(holds_.size()) - 1);
      }
    }
    if (any_sent) host_sends_.push_back(std::move(sent));
    for (const Transfer* x : Find(t, TransferKind::kBuffersOut, -1)) {
      Add(d, kSwapOut, kToHost, x->bytes / to_host_bw_, {last_compute},
          Name([&] { return absl::StrCat("buffers out ", label); }));
    }
    if (t.kind != TaskKind::kBackward) continue;
    const uint64_t grads = m_.GradientBytes(t.vlayers.begin, t.vlayers.end);
    int grads_free = last_compute;
    int reduce = -1;
    if (const auto& xs = Find(t, TransferKind::kGradientReduce, -1); !xs.empty()) {  // One.
      const int by = summed_by(t, *xs.front());
      reduce = Add(d, kPeer, kNoLink, reduce_bytes[by] / peer_bw_, {last_compute},
                   Name([&] { return absl::StrCat("reduce ", label); }));
      reduce_waiting[by].push_back(reduce);
      // A receive buffer: the runtime sums one parameter's copy at a time;
      // a vLayer's gradients bound it.
      uint64_t largest = 0;
      for (int l = t.vlayers.begin; l < t.vlayers.end; ++l) {
        largest = std::max(largest, m_.GradientBytes(l, l + 1));
      }
      holds_.push_back({d, largest, reduce, reduce});
      grads_free = reduce;
      end_ops_[t.id].push_back(reduce);
      reduce_op_[t.id] = reduce;
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
    grads_hold_[t.id] = static_cast<int>(holds_.size()) - 1;
  }
  if (clip_ == ClipSim::kHold || clip_ == ClipSim::kSpeculateFires) {
    // Every backward's gradients on the host: the norm is known.
    std::vector<int> all;
    for (const auto& [update, ops] : gradients_out) all.insert(all.end(), ops.begin(), ops.end());
    if (clip_ == ClipSim::kHold && !update_ops.empty()) {
      // The first update waits; the others follow it on the host's stream.
      auto& deps = ops_[update_ops.front()].deps;
      deps.insert(deps.end(), all.begin(), all.end());
    } else if (!copy_s.empty()) {
      double redo = 0;
      for (size_t i = 0; i < copy_s.size(); ++i) redo += copy_s[i] + step_s[i];
      all.insert(all.end(), update_ops.begin(), update_ops.end());
      Add(-1, kCompute, kNoLink, redo, all, Name([] { return std::string("redo clipped updates"); }));
    }
  }
  // A reduction starts when every device has its gradients.
  for (const auto& [by, ops] : reduce_waiting) {
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

}  // namespace harmony::planner::sim_internal
