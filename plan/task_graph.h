// The plan contract (docs/DESIGN.md §5.4): the task graph of one training
// iteration, what each device runs, in order, with every swap and transfer it
// makes and their sizes. The planner builds it (planner/search), the
// simulator plays it, the executor runs it; this package depends on none of
// them.
//
// Harmony's order: the forward tasks of all forward packs in pack order,
// then for each backward pack in reverse, its backward task immediately
// followed by its update (on the host's CPU optimizer). The last backward
// pack fuses forward, loss and backward. A task runs all its microbatches
// while the pack's weights are resident (input-batch grouping).
//
// vPP places the GPU tasks (forwards, then backwards) round-robin over the
// devices; activations go device-to-device where consecutive tasks are on
// different devices, through the host otherwise; each backward pack's input
// is stashed to the host at forward time. vDP gives every device every pack
// over its share of the minibatch; activations hop through the host, and
// gradients are summed across devices before the update. A device's last
// forward pack stays resident into its first backward task when they are
// the same pack. Every task lists its weight swap-in, and the task before it
// on the same device lists the prefetch of those weights (unless the config
// is single-buffered, Config::prefetch, or the pack's weights come late,
// Config::late_forward / late_backward).
//
// Thread-safety: plain values.

#ifndef HARMONY_PLAN_TASK_GRAPH_H_
#define HARMONY_PLAN_TASK_GRAPH_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace harmony::plan {

// A contiguous range of vLayers.
struct PackRange {
  int begin = 0;
  int end = 0;  // Exclusive.
  bool operator==(const PackRange& o) const {
    return begin == o.begin && end == o.end;
  }
};
using Packing = std::vector<PackRange>;


enum class Mode { kVpp, kVdp };
enum class TaskKind { kForward, kBackward, kUpdate };
enum class Schedule { kHarmony, kOndemand, kGpipe, kDpSwap };

struct Config {
  Mode mode = Mode::kVpp;
  Schedule schedule = Schedule::kHarmony;
  int num_devices = 1;
  uint64_t device_memory = 0;
  int minibatch = 1;
  int forward_microbatch = 1;   // U_f >= U_b.
  int backward_microbatch = 1;
  // Harmony: a backward pack's own microbatch where it differs from U_b
  // (at a pack's index; 0 or absent: U_b), between U_b and U_f. A pack
  // whose backward fits a device at a larger microbatch than the heaviest
  // pack's (GPT's lm_head with the loss holds U_b down) runs at it: fewer,
  // larger kernels. Gradients between packs of different microbatches go
  // through the host and are cut or joined there (the rows are the same).
  // Models that draw dropout masks or update batch statistics keep every
  // size equal (their recompute must see the forward's microbatches).
  std::vector<int> backward_pack_microbatch;
  int BackwardMicrobatch(int pack) const {
    return pack >= 0 && pack < static_cast<int>(backward_pack_microbatch.size()) &&
                   backward_pack_microbatch[pack] > 0
               ? backward_pack_microbatch[pack]
               : backward_microbatch;
  }
  Packing forward_packs;   // Cover [0, last backward pack's begin).
  Packing backward_packs;  // Cover every vLayer; the last fuses the loss.
  // Whether a task prefetches the next task's weights on its device (two
  // packs' weights resident at once); false: single-buffered, each task
  // swaps its own weights in when it starts (for packs that fill a device).
  bool prefetch = true;
  // With `prefetch`: the packs whose weights come when their task starts
  // all the same (true at a pack's index; empty: none), forward packs in
  // `late_forward`, backward packs in `late_backward`: what a device holds
  // during the task before leaves no room for them. The search chooses
  // them per pack (planner/search/prefetch_choice.h).
  std::vector<bool> late_forward;
  std::vector<bool> late_backward;
  // Whether the weights of pack `pack` (of forward_packs for kForward, else
  // of backward_packs) are prefetched during the device's previous task.
  bool Prefetches(TaskKind kind, int pack) const;
  // vDP: whether what a task sends to the next task of its device that
  // reads it (activations forward, their gradients backward, microbatches
  // of one size) stays on the device instead of going out to the host and
  // back. Saves their bytes on the link twice; the device holds them from
  // the sender's compute to the receiver's.
  bool local_activations = false;
  // vDP on several devices: device 0 swaps each pack's parameters in from
  // the host and every other device copies them from device 0 (PEER
  // weights-in), so they cross the host link once instead of once per
  // device; buffers still come from the host (a forward may be updating
  // device 0's). Device 0 keeps its copy until every peer has taken it.
  bool peer_weights = false;
  // vPP: the backward packs whose gradients are summed on the host (true
  // at a pack's index; empty: none). Such a pack's backward task sends its
  // gradients out after every microbatch and frees them, so a microbatch's
  // backward holds only its own fresh gradients, never those accumulated
  // beside them: an embedding table's dense gradient needs 2x its table
  // instead of 3x. The host sums them in microbatch order, as the device
  // would (the same adds, bit for bit), at the cost of (U - 1) more copies
  // of the pack's gradients over the link.
  std::vector<bool> host_sums;
  bool HostSums(int pack) const {
    return pack >= 0 && pack < static_cast<int>(host_sums.size()) && host_sums[pack];
  }
  // The backward packs that keep their activations (true at a pack's
  // index; empty: none): the forward task that computes the pack's vLayers
  // records autograd's saved tensors for each microbatch and sends them to
  // the host (KEPT_OUT); the backward task takes them back (KEPT_IN) and
  // runs autograd's backward on them without recomputing the forward. The
  // others recompute from their stashed input. Only a pack whose vLayers
  // lie in one forward pack, with equal forward and backward microbatches,
  // can keep; never the last (its forward and backward are fused).
  std::vector<bool> keep;
  bool Keeps(int pack) const {
    return pack >= 0 && pack < static_cast<int>(keep.size()) && keep[pack];
  }
  // vDP Harmony: the minibatch runs as `waves` passes one after another,
  // each forward and backward over every pack on its own slice of the
  // samples (the first minibatch mod waves slices one sample larger),
  // the gradients of every pass summed on the host and the packs updated
  // once, after the last pass. Each pass swaps the weights in again, but
  // what a device holds between its packs (local activations) is one
  // wave's: a large minibatch keeps its activations on the devices instead
  // of sending them through the host at every pack.
  int waves = 1;
  // At most this many microbatches of a task hold what they send to the
  // host (activations, their gradients, stashes) on the device while it
  // is copied out: microbatch m computes once microbatch m - N's have left
  // (0: no bound, the device computes on and they queue). Where the link
  // is slower than the compute, a task of many microbatches would
  // otherwise hold them all: a large minibatch in one pass then needs
  // device memory in proportion to it. The search sets it where a
  // candidate fits only so (kHostOutputsPending).
  int host_outputs_pending = 0;
  // How many microbatches ahead of the one computing a task's host inputs
  // are copied in (0: kInputsAhead). Fewer hold less on the device: the
  // search lowers it for candidates that fit only so (down to
  // kFewerInputsAhead).
  int inputs_ahead = 0;
  int InputsAhead() const;
};

// The bound the search tries (Config::host_outputs_pending), as many as the
// inputs ahead: on gpt at minibatch 256 in one pass (2 x 6.38 MiB, emulated
// 234.47 MB/s, AMD EPYC) 7.48 s simulated at 4, 7.44 s at 2; without a bound
// no Harmony candidate fits (peaks of 6.3 MiB and more against 5.74 usable).
constexpr int kHostOutputsPending = 4;

// The samples of wave `w` of `c`: [first, first + size).
struct WaveSlice {
  int first = 0;
  int size = 0;
};
WaveSlice WaveSamples(const Config& c, int w);

// How many microbatches ahead of the one computing a device copies a task's
// host inputs in (data, activations, stashes, kept activations): microbatch
// m's start once microbatch m - kInputsAhead - 1 has computed, so what they
// hold on the device does not grow with the minibatch. The runtime and the
// simulator both follow it. 4, not 2: on one host link the copies queue in
// the order they are asked for, and with 2 a pack's last stashes were asked
// for after the next pack's weights and waited behind them (zoo vgg, 2 x
// 5.94 MiB, minibatch 64, emulated 255.56 MB/s: 517 ms simulated at 2, 504
// at 3, 495 at 4, 499 at 5, 504 at 8; measured 0.970x the iteration at 4,
// the GPT 0.99x; AMD EPYC).
constexpr int kInputsAhead = 4;
// The fewest the search tries where a candidate does not fit with
// kInputsAhead (Config::inputs_ahead): it tries each of kInputsAhead - 1
// down to this that could free enough (planner/search/fit_retries.h).
constexpr int kFewerInputsAhead = 1;
inline int Config::InputsAhead() const { return inputs_ahead > 0 ? inputs_ahead : kInputsAhead; }

enum class TransferKind {
  kWeightsIn,
  kPrefetchWeights,  // Of a later task on this device, during this one.
  kGradientsOut,
  kActivationsIn,    // Activations, or their gradients in backward.
  kActivationsOut,
  kStashOut,
  kStashIn,
  kKeepResident,
  kGradientReduce,
  kDataIn,
  // Buffers a forward updated (BatchNorm statistics), back to the host.
  kBuffersOut,
  // A kept pack's saved activations: out by the forward, in by the backward
  // (Config::keep).
  kKeptOut,
  kKeptIn,
};

enum class Channel { kHost, kPeer, kLocal };

struct Transfer {
  TransferKind kind = TransferKind::kWeightsIn;
  Channel channel = Channel::kHost;
  PackRange vlayers;
  int microbatch = -1;   // -1: all of the task's microbatches.
  int peer_device = -1;  // -1: the host.
  int peer_task = -1;
  uint64_t bytes = 0;
};

struct Microbatch {
  int index = 0;   // Position in the task's phase (forward or backward).
  int offset = 0;  // First sample in the minibatch.
  int size = 0;
};

struct Task {
  int id = 0;  // Position in the iteration's global order.
  TaskKind kind = TaskKind::kForward;
  int pack = 0;  // Index into forward_packs or backward_packs.
  PackRange vlayers;
  int device = 0;  // For updates: whose gradients it applies.
  std::vector<Microbatch> microbatches;
  bool fused_loss = false;
  std::vector<Transfer> transfers;
  std::vector<int> depends_on;  // Beyond the order of the device's list.
};

struct TaskGraph {
  Config config;
  std::vector<Task> tasks;  // In global order; tasks[i].id == i.

  // The device's forward/backward tasks in order (updates excluded).
  std::vector<int> DeviceTasks(int device) const;
};

// Splits `samples` into microbatches of `size` (the last may be smaller).
std::vector<Microbatch> SplitMicrobatches(int first_sample, int samples, int size);

// Whether backward task `t` sums its gradients on the host (a pack of
// Config::host_sums): it has GRADIENTS_OUT transfers of single microbatches.
bool SumsGradientsOnHost(const Task& t);

// Whether task `t` reduces its gradients across the devices (a
// GRADIENT_REDUCE transfer: vDP's summing device or one that hands them).
bool ReducesGradients(const Task& t);

// The order the host sums each vLayer's gradients in, whatever order they
// arrive in: per vLayer, every GRADIENTS_OUT that carries it, keyed by
// (task id, microbatch; -1 for the one at the task's end), numbered 0..n-1.
// The n-th send of each task before the (n+1)-th of any, then by task id:
// devices that run a pack side by side interleave, so few wait. Fixed by the
// plan, so that two runs of it sum in the same order (floating-point sums
// depend on it) however the devices' timing falls.
std::vector<std::map<std::pair<int, int>, int>> GradientSumOrder(const TaskGraph& g);

std::string TaskKindName(TaskKind kind);
std::string TransferKindName(TransferKind kind);
std::string ModeName(Mode mode);
std::string ScheduleName(Schedule schedule);

}  // namespace harmony::plan

#endif  // HARMONY_PLAN_TASK_GRAPH_H_
