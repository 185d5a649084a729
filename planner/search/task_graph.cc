#include "planner/search/task_graph.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace harmony::planner {
namespace {

absl::Status Invalid(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("invalid configuration: ", why));
}

// Builds transfers between tasks of one device's sample share.
class Builder {
 public:
  Builder(const CostModel& m, const Config& c, TaskGraph* g) : m_(m), c_(c), g_(*g) {}

  int AddTask(TaskKind kind, int pack, PackRange range, int device,
              std::vector<Microbatch> mbs, bool fused) {
    Task t;
    t.id = static_cast<int>(g_.tasks.size());
    t.kind = kind;
    t.pack = pack;
    t.vlayers = range;
    t.device = device;
    t.microbatches = std::move(mbs);
    t.fused_loss = fused;
    g_.tasks.push_back(std::move(t));
    return g_.tasks.back().id;
  }

  // Sends from task `from` to task `to` the tensors vLayers `producer` make
  // and vLayers `consumer` read (forward: activations, from producer to
  // consumer; backward: their gradients, from consumer to producer). Per
  // microbatch, through the host when the two tasks' microbatches differ.
  // With `local`, tensors between tasks of one device stay on it.
  void Link(int from, int to, PackRange producer, PackRange consumer, bool local = false) {
    Task& a = g_.tasks[from];
    Task& b = g_.tasks[to];
    const bool aligned = a.microbatches.size() == b.microbatches.size() &&
                         a.microbatches.front().size == b.microbatches.front().size;
    const Channel channel = (local && a.device == b.device && aligned) ? Channel::kLocal
                            : (a.device != b.device && aligned)        ? Channel::kPeer
                                                                       : Channel::kHost;
    // Between backward tasks only gradients of floating-point tensors go.
    const bool gradients = a.kind == TaskKind::kBackward;
    auto bytes_at = [&](int size) {
      return m_.CrossBytes(producer.begin, producer.end, consumer.begin, consumer.end, size,
                           gradients);
    };
    // Nothing to send: no tensor bytes and, forward, no other value either
    // (an int from a shape has no bytes but must reach its reader).
    if (bytes_at(1) == 0 && bytes_at(2) == 0 &&
        (gradients || !m_.Reads(producer.begin, producer.end, consumer.begin, consumer.end))) {
      return;
    }
    for (const Microbatch& mb : a.microbatches) {
      Transfer t{TransferKind::kActivationsOut, channel, a.vlayers, mb.index,
                 channel == Channel::kPeer ? b.device : -1, to, bytes_at(mb.size)};
      a.transfers.push_back(t);
    }
    for (const Microbatch& mb : b.microbatches) {
      Transfer t{TransferKind::kActivationsIn, channel, b.vlayers, mb.index,
                 channel == Channel::kPeer ? a.device : -1, from, bytes_at(mb.size)};
      b.transfers.push_back(t);
    }
    AddDependency(to, from);
  }

  void DataIn(int task) {
    Task& t = g_.tasks[task];
    for (const Microbatch& mb : t.microbatches) {
      uint64_t bytes = m_.CrossBytes(-1, 0, t.vlayers.begin, t.vlayers.end, mb.size);
      if (t.fused_loss) bytes += m_.TargetBytes(mb.size);
      if (bytes == 0) continue;
      t.transfers.push_back(
          {TransferKind::kDataIn, Channel::kHost, t.vlayers, mb.index, -1, -1, bytes});
    }
  }

  // The stash of backward pack `bwd`'s input: out at forward time by `fwd`,
  // in by the backward task `back`.
  void Stash(int fwd, int back) {
    Task& f = g_.tasks[fwd];
    Task& b = g_.tasks[back];
    const PackRange r = b.vlayers;
    // Everything the pack reads from earlier vLayers (data is re-read).
    auto bytes_at = [&](int size) { return m_.CrossBytes(0, r.begin, r.begin, r.end, size); };
    for (const Microbatch& mb : f.microbatches) {
      f.transfers.push_back({TransferKind::kStashOut, Channel::kHost, r, mb.index, -1,
                             back, bytes_at(mb.size)});
    }
    for (const Microbatch& mb : b.microbatches) {
      b.transfers.push_back({TransferKind::kStashIn, Channel::kHost, r, mb.index, -1, fwd,
                             bytes_at(mb.size)});
    }
    AddDependency(back, fwd);
  }

  // Backward pack `back`'s saved activations, per microbatch: out by the
  // forward task `fwd` that computes its vLayers, in by `back`
  // (Config::keep; the microbatches are the same on both sides).
  void Keep(int fwd, int back) {
    Task& f = g_.tasks[fwd];
    Task& b = g_.tasks[back];
    const PackRange r = b.vlayers;
    for (const Microbatch& mb : f.microbatches) {
      f.transfers.push_back({TransferKind::kKeptOut, Channel::kHost, r, mb.index, -1, back,
                             m_.KeptBytes(r.begin, r.end, mb.size)});
    }
    for (const Microbatch& mb : b.microbatches) {
      b.transfers.push_back({TransferKind::kKeptIn, Channel::kHost, r, mb.index, -1, fwd,
                             m_.KeptBytes(r.begin, r.end, mb.size)});
    }
    AddDependency(back, fwd);
  }

  // Weight swaps along each device's task list: every task swaps its
  // weights in, prefetched during the device's previous task; a device's
  // last forward task keeps them for its first backward task on the same
  // pack range.
  void Weights() {
    for (int d = 0; d < c_.num_devices; ++d) {
      std::vector<int> list = g_.DeviceTasks(d);
      for (size_t i = 0; i < list.size(); ++i) {
        Task& t = g_.tasks[list[i]];
        const uint64_t bytes = m_.WeightBytes(t.vlayers.begin, t.vlayers.end);
        if (i > 0) {
          Task& prev = g_.tasks[list[i - 1]];
          // Same pack range next: the weights stay (Harmony's last forward
          // into its first backward; a baseline staying on its pack).
          if (prev.vlayers == t.vlayers) {
            prev.transfers.push_back({TransferKind::kKeepResident, Channel::kLocal,
                                      t.vlayers, -1, d, t.id, bytes});
            continue;
          }
          if (c_.Prefetches(t.kind, t.pack)) {
            prev.transfers.push_back({TransferKind::kPrefetchWeights, Channel::kHost,
                                      t.vlayers, -1, -1, t.id, bytes});
          }
        }
        const int during = i > 0 && c_.Prefetches(t.kind, t.pack) ? list[i - 1] : -1;
        if (c_.peer_weights && c_.mode == Mode::kVdp && d > 0) {
          // Parameters from device 0's task at the same place in its list
          // (the same pack and kind), buffers from the host.
          const uint64_t buffers = m_.BufferBytes(t.vlayers.begin, t.vlayers.end);
          std::vector<Transfer> in = {{TransferKind::kWeightsIn, Channel::kPeer, t.vlayers, -1,
                                       0, during, bytes - buffers}};
          if (buffers > 0) {
            in.push_back({TransferKind::kWeightsIn, Channel::kHost, t.vlayers, -1, -1, during,
                          buffers});
          }
          t.transfers.insert(t.transfers.begin(), in.begin(), in.end());
          continue;
        }
        t.transfers.insert(t.transfers.begin(),
                           Transfer{TransferKind::kWeightsIn, Channel::kHost, t.vlayers, -1,
                                    -1, during, bytes});
      }
    }
  }

  // The buffers a forward of the task's vLayers updated go back to the
  // host (vDP keeps device 0's, as data parallel training keeps rank 0's).
  void BuffersOut(int task) {
    Task& t = g_.tasks[task];
    const uint64_t bytes = m_.UpdatedBufferBytes(t.vlayers.begin, t.vlayers.end);
    if (bytes == 0) return;
    t.transfers.push_back(
        {TransferKind::kBuffersOut, Channel::kHost, t.vlayers, -1, -1, -1, bytes});
  }

  // Gradients to the update task; a fused task's forward also updated its
  // buffers, which go with them when `buffers`. A pack summed on the host
  // (Config::host_sums) sends them after each microbatch but the last too.
  void GradientsOut(int task, int update, bool buffers) {
    Task& t = g_.tasks[task];
    const PackRange r = t.vlayers;
    if (t.kind == TaskKind::kBackward && c_.HostSums(t.pack)) {
      for (size_t i = 0; i + 1 < t.microbatches.size(); ++i) {
        t.transfers.push_back({TransferKind::kGradientsOut, Channel::kHost, r,
                               t.microbatches[i].index, -1, update,
                               m_.GradientBytes(r.begin, r.end)});
      }
    }
    t.transfers.push_back({TransferKind::kGradientsOut, Channel::kHost, r, -1, -1, update,
                           m_.GradientBytes(r.begin, r.end) +
                               (buffers && t.fused_loss ? m_.UpdatedBufferBytes(r.begin, r.end)
                                                        : 0)});
    AddDependency(update, task);
  }

  void AddDependency(int task, int on) {
    auto& deps = g_.tasks[task].depends_on;
    if (std::find(deps.begin(), deps.end(), on) == deps.end()) deps.push_back(on);
  }

 private:
  const CostModel& m_;
  const Config& c_;
  TaskGraph& g_;
};

// For each pack of `consumers`, the packs of `producers` (by index) whose
// vLayers it reads, in increasing order.
std::vector<std::vector<int>> Feeds(const CostModel& m, const Packing& producers,
                                    const Packing& consumers) {
  std::vector<int> pack_of(m.num_layers(), -1);
  for (size_t i = 0; i < producers.size(); ++i) {
    for (int l = producers[i].begin; l < producers[i].end; ++l) pack_of[l] = static_cast<int>(i);
  }
  std::vector<std::vector<int>> feeds(consumers.size());
  for (size_t p = 0; p < consumers.size(); ++p) {
    for (int l = consumers[p].begin; l < consumers[p].end; ++l) {
      for (int producer : m.Producers(l)) {
        const int i = pack_of[producer];
        if (i < 0 || (producers[i].begin <= l && l < producers[i].end)) continue;
        if (std::find(feeds[p].begin(), feeds[p].end(), i) == feeds[p].end()) {
          feeds[p].push_back(i);
        }
      }
    }
    std::sort(feeds[p].begin(), feeds[p].end());
  }
  return feeds;
}

// The forward pack that stashes backward pack `r`'s input (the one holding
// its first vLayer), or -1 when there is none (r starts at vLayer 0 and
// recomputes from the data).
int StashSource(const Packing& forward_packs, const PackRange& r) {
  if (r.begin == 0) return -1;
  for (size_t p = 0; p < forward_packs.size(); ++p) {
    if (r.begin >= forward_packs[p].begin && r.begin < forward_packs[p].end) {
      return static_cast<int>(p);
    }
  }
  return -1;
}

}  // namespace

int KeepSource(const Packing& forward_packs, const PackRange& r) {
  for (size_t p = 0; p < forward_packs.size(); ++p) {
    if (r.begin >= forward_packs[p].begin && r.end <= forward_packs[p].end) {
      return static_cast<int>(p);
    }
  }
  return -1;
}

namespace {

std::vector<Microbatch> Indexed(std::vector<Microbatch> mbs) {
  for (size_t i = 0; i < mbs.size(); ++i) mbs[i].index = static_cast<int>(i);
  return mbs;
}

void BuildVpp(const CostModel& m, const Config& c, TaskGraph& g) {
  Builder b(m, c, &g);
  const std::vector<Microbatch> fmb = SplitMicrobatches(0, c.minibatch, c.forward_microbatch);
  const int nf = static_cast<int>(c.forward_packs.size());
  const int nb = static_cast<int>(c.backward_packs.size());
  int slot = 0;  // Round-robin position over the devices.
  std::vector<int> fwd(nf), bwd(nb), upd(nb);
  for (int p = 0; p < nf; ++p) {
    fwd[p] = b.AddTask(TaskKind::kForward, p, c.forward_packs[p], slot++ % c.num_devices,
                       fmb, false);
  }
  for (int q = nb - 1; q >= 0; --q) {
    bwd[q] = b.AddTask(TaskKind::kBackward, q, c.backward_packs[q], slot++ % c.num_devices,
                       SplitMicrobatches(0, c.minibatch, c.BackwardMicrobatch(q)), q == nb - 1);
    upd[q] = b.AddTask(TaskKind::kUpdate, q, c.backward_packs[q], g.tasks[bwd[q]].device,
                       {}, false);
  }
  // Forward: data, activations from earlier forward packs, stashes.
  const auto fwd_feeds = Feeds(m, c.forward_packs, c.forward_packs);
  const auto fused_feeds = Feeds(m, c.forward_packs, c.backward_packs);
  const auto bwd_feeds = Feeds(m, c.backward_packs, c.backward_packs);
  for (int p = 0; p < nf; ++p) {
    b.DataIn(fwd[p]);
    for (int i : fwd_feeds[p]) b.Link(fwd[i], fwd[p], c.forward_packs[i], c.forward_packs[p]);
    b.BuffersOut(fwd[p]);
  }
  for (int q = 0; q < nb; ++q) {
    const PackRange r = c.backward_packs[q];
    if (c.Keeps(q)) {
      // Its forward task's saved activations; no data, no stash.
      b.Keep(fwd[KeepSource(c.forward_packs, r)], bwd[q]);
    } else {
      b.DataIn(bwd[q]);
    }
    if (q == nb - 1) {
      // The fused pack reads the forward packs' outputs directly.
      for (int i : fused_feeds[q]) b.Link(fwd[i], bwd[q], c.forward_packs[i], r);
    } else if (!c.Keeps(q)) {
      // Stashed at forward time by the forward task holding its first vLayer.
      if (int p = StashSource(c.forward_packs, r); p >= 0) b.Stash(fwd[p], bwd[q]);
    }
    // Gradients of its outputs from the later backward packs that read them.
    for (int later = q + 1; later < nb; ++later) {
      const auto& f = bwd_feeds[later];
      if (std::find(f.begin(), f.end(), q) == f.end()) continue;
      b.Link(bwd[later], bwd[q], r, c.backward_packs[later]);
    }
    // Gradients, and the buffers the fused pass updated (BatchNorm
    // statistics; a recompute updates scratch copies only).
    b.GradientsOut(bwd[q], upd[q], true);
  }
  b.Weights();
}

void BuildVdp(const CostModel& m, const Config& c, TaskGraph& g) {
  Builder b(m, c, &g);
  const int n = c.num_devices;
  const int nf = static_cast<int>(c.forward_packs.size());
  const int nb = static_cast<int>(c.backward_packs.size());
  const int waves = std::max(1, c.waves);
  const auto fwd_feeds = Feeds(m, c.forward_packs, c.forward_packs);
  const auto fused_feeds = Feeds(m, c.forward_packs, c.backward_packs);
  const auto bwd_feeds = Feeds(m, c.backward_packs, c.backward_packs);
  // Every wave's backward tasks per pack and device; one update per pack,
  // after the last wave's backward of it.
  std::vector<std::vector<std::vector<int>>> all_bwd;
  std::vector<int> upd(nb);
  for (int w = 0; w < waves; ++w) {
    const WaveSlice slice = WaveSamples(c, w);
    // Device d's share of the wave; the first (size mod N) get one more.
    std::vector<int> share_begin(n), share_size(n);
    for (int d = 0, at = slice.first; d < n; ++d) {
      share_size[d] = slice.size / n + (d < slice.size % n ? 1 : 0);
      share_begin[d] = at;
      at += share_size[d];
    }
    std::vector<std::vector<int>> fwd(nf, std::vector<int>(n)), bwd(nb, std::vector<int>(n));
    for (int p = 0; p < nf; ++p) {
      for (int d = 0; d < n; ++d) {
        fwd[p][d] = b.AddTask(TaskKind::kForward, p, c.forward_packs[p], d,
                              Indexed(SplitMicrobatches(share_begin[d], share_size[d],
                                                        c.forward_microbatch)),
                              false);
      }
    }
    for (int q = nb - 1; q >= 0; --q) {
      for (int d = 0; d < n; ++d) {
        bwd[q][d] = b.AddTask(TaskKind::kBackward, q, c.backward_packs[q], d,
                              Indexed(SplitMicrobatches(share_begin[d], share_size[d],
                                                        c.BackwardMicrobatch(q))),
                              q == nb - 1);
      }
      if (w == waves - 1) {
        upd[q] = b.AddTask(TaskKind::kUpdate, q, c.backward_packs[q], 0, {}, false);
      }
    }
    for (int d = 0; d < n; ++d) {
      for (int p = 0; p < nf; ++p) {
        b.DataIn(fwd[p][d]);
        for (int i : fwd_feeds[p]) {
          b.Link(fwd[i][d], fwd[p][d], c.forward_packs[i], c.forward_packs[p],
                 c.local_activations);
        }
        if (d == 0) b.BuffersOut(fwd[p][d]);
      }
      for (int q = 0; q < nb; ++q) {
        const PackRange r = c.backward_packs[q];
        if (c.Keeps(q)) {
          b.Keep(fwd[KeepSource(c.forward_packs, r)][d], bwd[q][d]);
        } else {
          b.DataIn(bwd[q][d]);
        }
        if (q == nb - 1) {
          for (int i : fused_feeds[q]) {
            b.Link(fwd[i][d], bwd[q][d], c.forward_packs[i], r, c.local_activations);
          }
        } else if (!c.Keeps(q)) {
          if (int p = StashSource(c.forward_packs, r); p >= 0) b.Stash(fwd[p][d], bwd[q][d]);
        }
        for (int later = q + 1; later < nb; ++later) {
          const auto& f = bwd_feeds[later];
          if (std::find(f.begin(), f.end(), q) == f.end()) continue;
          b.Link(bwd[later][d], bwd[q][d], r, c.backward_packs[later], c.local_activations);
        }
      }
    }
    all_bwd.push_back(std::move(bwd));
  }
  // Gradients summed across devices onto device 0 (a reduce, not an
  // all-reduce: the CPU optimizer needs one copy): every other device sends
  // its gradients to device 0, whose transfer is the receiving end (0
  // bytes, from every peer); then device 0's sum goes to the host, where
  // the waves' sums are added in order.
  for (const std::vector<std::vector<int>>& bwd : all_bwd) {
    for (int q = 0; q < nb; ++q) {
      const PackRange r = c.backward_packs[q];
      const uint64_t grads = m.GradientBytes(r.begin, r.end);
      for (int d = 0; d < n; ++d) {
        Task& t = g.tasks[bwd[q][d]];
        if (n > 1) {
          t.transfers.push_back({TransferKind::kGradientReduce, Channel::kPeer, r, -1,
                                 d == 0 ? -1 : 0, d == 0 ? -1 : bwd[q][0],
                                 d == 0 ? 0 : grads});
        }
        if (d == 0) b.GradientsOut(bwd[q][d], upd[q], true);
        b.AddDependency(upd[q], bwd[q][d]);
      }
    }
  }
  b.Weights();
}

// The on-demand configuration: data parallel, one vLayer per pack.
Config OndemandConfig(const CostModel& m, Config c) {
  c.mode = Mode::kVdp;
  c.forward_microbatch = c.backward_microbatch;
  c.forward_packs.clear();
  c.backward_packs.clear();
  for (int l = 0; l < m.num_layers(); ++l) {
    if (l + 1 < m.num_layers()) c.forward_packs.push_back({l, l + 1});
    c.backward_packs.push_back({l, l + 1});
  }
  return c;
}

// The baselines, one microbatch per task (no input-batch grouping), so a
// device swaps a pack's weights in for every microbatch unless it stays on
// that pack, and gradients go out after every microbatch:
//   ondemand (vDNN / LMS style) and dp-swap: data parallel, every device
//     runs every pack on its share, forward then backward per microbatch;
//     ondemand with one vLayer per pack, dp-swap with the given packs;
//   gpipe: packs placed round-robin over the devices (stages), all
//     microbatches' forwards pipelined, then all their backwards.
// Activations between tasks of one device stay on it; each backward pack's
// input is offloaded at forward time.
void BuildPerMicrobatch(const CostModel& m, const Config& c, TaskGraph& g) {
  Builder b(m, c, &g);
  const int n = c.num_devices;
  const int nf = static_cast<int>(c.forward_packs.size());
  const int nb = static_cast<int>(c.backward_packs.size());
  const bool pipeline = c.schedule == Schedule::kGpipe;
  struct Planned {
    TaskKind kind;
    int pack;
    int device;
    Microbatch mb;
  };
  std::vector<Planned> order;
  if (pipeline) {
    const std::vector<Microbatch> mbs =
        SplitMicrobatches(0, c.minibatch, c.backward_microbatch);
    for (const Microbatch& mb : mbs) {
      for (int p = 0; p < nf; ++p) order.push_back({TaskKind::kForward, p, p % n, mb});
    }
    for (const Microbatch& mb : mbs) {
      for (int q = nb - 1; q >= 0; --q) order.push_back({TaskKind::kBackward, q, q % n, mb});
    }
  } else {
    // Each device's list, then interleaved into one global order.
    std::vector<std::vector<Planned>> per_device(n);
    for (int d = 0, at = 0; d < n; ++d) {
      const int share = c.minibatch / n + (d < c.minibatch % n ? 1 : 0);
      for (const Microbatch& mb : SplitMicrobatches(at, share, c.backward_microbatch)) {
        for (int p = 0; p < nf; ++p) per_device[d].push_back({TaskKind::kForward, p, d, mb});
        for (int q = nb - 1; q >= 0; --q) {
          per_device[d].push_back({TaskKind::kBackward, q, d, mb});
        }
      }
      at += share;
    }
    for (size_t step = 0;; ++step) {
      bool any = false;
      for (int d = 0; d < n; ++d) {
        if (step >= per_device[d].size()) continue;
        any = true;
        order.push_back(per_device[d][step]);
      }
      if (!any) break;
    }
  }
  // (kind, pack, first sample) -> task; microbatches are told apart by
  // their first sample, which is unique in the minibatch.
  std::map<std::tuple<int, int, int>, int> id;
  for (const Planned& p : order) {
    const Packing& packs = p.kind == TaskKind::kForward ? c.forward_packs : c.backward_packs;
    const int t = b.AddTask(p.kind, p.pack, packs[p.pack], p.device, {p.mb},
                            p.kind == TaskKind::kBackward && p.pack == nb - 1);
    id[{static_cast<int>(p.kind), p.pack, p.mb.offset}] = t;
  }
  std::vector<int> upd(nb);
  for (int q = nb - 1; q >= 0; --q) {
    upd[q] = b.AddTask(TaskKind::kUpdate, q, c.backward_packs[q], q % n, {}, false);
  }
  const auto fwd_feeds = Feeds(m, c.forward_packs, c.forward_packs);
  const auto fused_feeds = Feeds(m, c.forward_packs, c.backward_packs);
  const auto bwd_feeds = Feeds(m, c.backward_packs, c.backward_packs);
  const int kF = static_cast<int>(TaskKind::kForward);
  const int kB = static_cast<int>(TaskKind::kBackward);
  for (const auto& [key, t] : id) {
    const auto& [kind, pack, sample] = key;
    b.DataIn(t);
    // Buffers: one statistics stream per pack (GPipe's stage; device 0's
    // in data parallel).
    const bool keeps_buffers = pipeline || g.tasks[t].device == 0;
    if (kind == kF) {
      for (int i : fwd_feeds[pack]) {
        b.Link(id.at({kF, i, sample}), t, c.forward_packs[i], c.forward_packs[pack], true);
      }
      if (keeps_buffers) b.BuffersOut(t);
      continue;
    }
    const PackRange r = c.backward_packs[pack];
    if (pack == nb - 1) {
      for (int i : fused_feeds[pack]) {
        b.Link(id.at({kF, i, sample}), t, c.forward_packs[i], r, true);
      }
    } else {
      if (int p = StashSource(c.forward_packs, r); p >= 0) b.Stash(id.at({kF, p, sample}), t);
    }
    for (int later = pack + 1; later < nb; ++later) {
      const auto& f = bwd_feeds[later];
      if (std::find(f.begin(), f.end(), pack) == f.end()) continue;
      b.Link(id.at({kB, later, sample}), t, r, c.backward_packs[later], true);
    }
    b.GradientsOut(t, upd[pack], keeps_buffers);
  }
  b.Weights();
}

}  // namespace

absl::StatusOr<TaskGraph> BuildTaskGraph(const CostModel& model, const Config& requested) {
  const Config config = requested.schedule == Schedule::kOndemand
                            ? OndemandConfig(model, requested)
                            : requested;
  if (auto s = ValidateConfig(model, config); !s.ok()) return s;
  TaskGraph g;
  g.config = config;
  if (config.schedule != Schedule::kHarmony) {
    if (config.forward_microbatch != config.backward_microbatch) {
      return Invalid("the baselines use one microbatch size (U_f = U_b)");
    }
    if (config.schedule != Schedule::kGpipe && config.mode != Mode::kVdp) {
      return Invalid("ondemand and dp-swap are data parallel (mode vdp)");
    }
    BuildPerMicrobatch(model, config, g);
    return g;
  }
  if (config.mode == Mode::kVpp) {
    BuildVpp(model, config, g);
  } else {
    BuildVdp(model, config, g);
  }
  return g;
}

}  // namespace harmony::planner
