// The cost model the search and the simulator work from: a profile
// (proto::ProfileFile) validated once and turned into plain numbers, with
// costs at any microbatch size and of any contiguous pack of vLayers.
// LibTorch-free and deterministic.
//
// Sizes not profiled are interpolated linearly between the nearest profiled
// sizes (times, peaks and activation bytes all grow with the microbatch);
// past the largest profiled size they are extrapolated in proportion and
// marked as not fitting.
//
// Pack memory (what a pack needs on a device while it runs):
//   forward:  its weights + the largest transient of any of its vLayers
//             (activations are not kept without autograd);
//   backward: its weights and gradients + the pack's input + every vLayer's
//             saved activations (the recompute keeps them all for autograd)
//             + the transient of the backward of the vLayer where that is
//             largest (its measured backward peak above its weights, input
//             and saved activations: the gradient of its output, of its
//             input, and its parameters' fresh gradients, which exist beside
//             the accumulated ones from the second microbatch on), counted
//             with the saved activations of the vLayers before it, which
//             are freed only after. Profiles without saved_bytes: each
//             vLayer's backward peak above its weights, gradients and input.
//
// cost_model.cc reads the profile and prices times; cost_model_bytes.cc the
// activations between packs and the packs' memory.
//
// Thread-safety: immutable after Create.

#ifndef HARMONY_PLANNER_SEARCH_COST_MODEL_H_
#define HARMONY_PLANNER_SEARCH_COST_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/plan.pb.h"

namespace harmony::planner {

// One vLayer at one microbatch size.
struct LayerCost {
  // Beside the profile's other devices, all busy (the profile's
  // "computing beside N other busy device(s)"; alone on one device).
  double forward_s = 0;
  double backward_s = 0;  // Including the recompute.
  // With no other device computing (the simulator weighs the two by how
  // many devices compute beside it: CostModel::busy_neighbours).
  double forward_alone_s = 0;
  double backward_alone_s = 0;
  // Right after another vLayer of its task (a pack's second and later), it
  // takes this fraction of the times above (proto forward_chained; 1 in
  // profiles without it).
  double forward_chained = 1;
  double backward_chained = 1;
  uint64_t forward_peak = 0;
  uint64_t backward_peak = 0;
  // Before the gradients exist (a task's first microbatch); 0: unknown.
  uint64_t backward_first_peak = 0;
  // What the forward keeps for autograd until the backward (0 when the
  // profile did not measure it).
  uint64_t saved_bytes = 0;
  // What keeping its activations moves (proto kept_bytes; 0: not measured).
  uint64_t kept_bytes = 0;
  uint64_t input_bytes = 0;   // Live-ins (activations), all of them.
  uint64_t output_bytes = 0;  // Live-outs.
  bool forward_fits = false;
  bool backward_fits = false;
};

// What does not depend on the microbatch.
struct LayerSizes {
  uint64_t parameter_bytes = 0;
  uint64_t buffer_bytes = 0;
  uint64_t gradient_bytes = 0;
  uint64_t optimizer_state_bytes = 0;
  // The fp32 masters and their gradients on the host (bf16 plans: twice the
  // device's parameter_bytes / gradient_bytes; fp32: the same).
  uint64_t host_parameter_bytes = 0;
  uint64_t host_gradient_bytes = 0;
  double update_s = 0;  // CPU optimizer.
  // Writes its buffers in training (BatchNorm's running statistics).
  bool updates_buffers = false;
  uint64_t weight_bytes() const { return parameter_bytes + buffer_bytes; }
};

struct LinkBandwidths {
  double host_to_device = 0;  // Bytes per second, one device alone.
  double device_to_host = 0;
  double host_all_devices = 0;  // Per direction, all devices at once.
  double peer = 0;
  // A host transfer's fixed cost on top of bytes / bandwidth (its stream
  // and the link are held for it).
  double transfer_latency_s = 0;
};

// The servers of a data-parallel world and the network between them
// (docs/DESIGN.md §8): each vLayer's gradients are summed across the
// servers on the host's update thread before its update (a ring allreduce:
// 2 (S - 1) / S of the bytes each way, 2 (S - 1) steps of latency), and
// each iteration ends with a few small exchanges (loss, stop, buffers).
struct NetworkModel {
  int servers = 1;
  double bytes_per_s = 1.25e9;  // 10 Gb/s.
  double latency_s = 50e-6;
  // ZeRO-1: each server keeps 1 / servers of the optimizer state (reduce to
  // the owner and broadcast: the same bytes as an allreduce).
  bool shard_optimizer_state = false;
};

class CostModel {
 public:
  // Validates `file` (vLayers present, sizes increasing, bandwidths
  // positive); InvalidArgument saying what is wrong otherwise.
  // `host_link` > 0 replaces the profile's host<->device bandwidths (bytes
  // per second, per direction, shared by all devices): to plan for another
  // machine's link, or a link in balance with this machine's compute.
  // `network`: the world the plan is for (one server by default).
  // `host_link_latency` >= 0 replaces the profile's fixed cost per host
  // transfer (an emulated link's copy thread also oversleeps each one).
  static absl::StatusOr<std::shared_ptr<const CostModel>> Create(
      const proto::ProfileFile& file, double host_link = 0, const NetworkModel& network = {},
      double host_link_latency = -1);

  int num_layers() const { return static_cast<int>(sizes_.size()); }
  const LayerSizes& sizes(int layer) const { return sizes_[layer]; }
  const LinkBandwidths& bandwidths() const { return bandwidths_; }
  const NetworkModel& network() const { return network_; }
  // Summing [begin, end)'s gradients across the servers (0 for one).
  double ReduceSeconds(int begin, int end) const;
  // Bytes each server sends for it (a ring allreduce's 2 (S - 1) / S).
  uint64_t ReduceBytesPerServer(int begin, int end) const;
  // The small exchanges that end each iteration across servers.
  double IterationSyncSeconds() const;
  uint64_t device_memory() const { return device_memory_; }
  // Largest microbatch whose forward / backward fits every vLayer.
  int max_forward_microbatch() const { return max_forward_; }
  int max_backward_microbatch() const { return max_backward_; }
  // Smallest profiled microbatch (2 for models that cannot run on one
  // sample, such as BatchNorm over a 1x1 map).
  int min_microbatch() const { return min_; }
  // Whether some vLayer depends on batch statistics (BatchNorm in training):
  // the forward and backward microbatches must then be equal.
  bool has_batch_statistics() const { return batch_statistics_; }
  // Whether some vLayer draws random numbers (dropout).
  bool uses_rng() const { return uses_rng_; }
  // Forward and backward microbatches must be equal: batch statistics must
  // see the same batches in forward and recompute, and the runtime's random
  // stream is defined per (iteration, microbatch, vLayer).
  bool needs_equal_microbatches() const { return batch_statistics_ || uses_rng_; }

  LayerCost Cost(int layer, int microbatch) const;

  // Bytes of the activations that enter [begin, end) from before it (from
  // earlier vLayers; forward's own arguments count at begin = 0).
  uint64_t PackInputBytes(int begin, int end, int microbatch) const;
  // Bytes of the targets of `microbatch` samples that a loss applied
  // outside the model reads (0 when forward returns the loss): loaded onto
  // the device of the last backward pack. The profiler measures the last
  // vLayer's backward with its loss and targets, so BackwardMemory already
  // counts them (in that vLayer's transient).
  uint64_t TargetBytes(int microbatch) const;
  // Bytes of the pack's live-outs read by vLayers at or after `end`.
  uint64_t PackOutputBytes(int begin, int end, int microbatch) const;

  // Bytes of the activations produced in [producer_begin, producer_end) and
  // read in [consumer_begin, consumer_end), each tensor once. The producer
  // range [-1, 0) means forward's own arguments (the data).
  // With `gradients`, only floating-point tensors count (the others have
  // no gradient to send back).
  uint64_t CrossBytes(int producer_begin, int producer_end, int consumer_begin,
                      int consumer_end, int microbatch, bool gradients = false) const;
  // Whether a vLayer of [consumer_begin, consumer_end) reads any output of
  // [producer_begin, producer_end): also values of no bytes (an int from a
  // shape, a bool), which still have to reach their reader.
  bool Reads(int producer_begin, int producer_end, int consumer_begin, int consumer_end) const;

  // The vLayers whose outputs `layer` reads (forward's arguments excluded).
  std::vector<int> Producers(int layer) const;

  // Sums over [begin, end).
  uint64_t WeightBytes(int begin, int end) const;  // Parameters and buffers.
  uint64_t BufferBytes(int begin, int end) const;
  // Buffers of the vLayers that update them (written back after a forward).
  uint64_t UpdatedBufferBytes(int begin, int end) const;
  uint64_t GradientBytes(int begin, int end) const;
  uint64_t OptimizerStateBytes(int begin, int end) const;
  // The host's fp32 copies: masters with the buffers, and gradients (the
  // device-side sizes above are bf16 in a bf16 profile).
  uint64_t HostWeightBytes(int begin, int end) const;
  uint64_t HostGradientBytes(int begin, int end) const;
  double UpdateSeconds(int begin, int end) const;
  // Compute times of a pack [begin, end) beside the profile's other devices,
  // all busy, or with `alone` with none computing (LayerCost): its first
  // vLayer's time and its later ones' chained times (LayerCost::
  // forward_chained; the backward's recompute runs the forwards in the same
  // order).
  double ForwardSeconds(int begin, int end, int microbatch, bool alone = false) const;
  double BackwardSeconds(int begin, int end, int microbatch, bool alone = false) const;
  // The least vLayer `layer`'s backward adds to any pack it is in: its
  // chained time (a lower bound for the search).
  double LeastBackwardSeconds(int layer, int microbatch) const;
  // A kept pack's backward (Config::keep): without the recompute, the
  // backward's time less the forward's, per vLayer (at least half the
  // backward's).
  double KeptBackwardSeconds(int begin, int end, int microbatch, bool alone = false) const;
  // The devices the profile timed each vLayer beside (its devices less
  // one; 0 for a profile of one device): a compute op's time is its time
  // alone plus (busy - alone) x (devices computing beside it, on average
  // over its span) / busy_neighbours (the simulator, sim::Reweigh).
  int busy_neighbours() const { return busy_neighbours_; }
  // A device's compute thread between two of its steps at this microbatch
  // (proto step_handoff_s): the simulator starts each compute this much
  // after its inputs, weights and stream allow. Between measured sizes,
  // interpolated; beyond them, the nearest; 0 when not measured.
  double StepHandoffSeconds(int microbatch) const;
  // Bytes a kept pack's saved activations take on the link each way, per
  // microbatch.
  uint64_t KeptBytes(int begin, int end, int microbatch) const;
  // Whether the profile measured kept bytes (packs can keep).
  bool measured_kept() const { return measured_kept_; }
  // Device memory the pack needs while it runs (see above).
  uint64_t ForwardMemory(int begin, int end, int microbatch) const;
  // `host_sums`: the pack's gradients are summed on the host after each
  // microbatch (Config::host_sums), so none accumulate on the device (the
  // same as without when the profile did not measure first peaks).
  uint64_t BackwardMemory(int begin, int end, int microbatch, bool host_sums = false) const;
  // What a microbatch of the pack holds on the device while it computes
  // beyond what the simulator holds on its own: the weights, the gradients,
  // the activations that enter the pack (in the forward, those read from
  // before `begin`; in the backward, also the gradients that arrive).
  // `first`: the task's first microbatch, when the gradients do not exist
  // yet and are made as the backward goes (the result then includes them).
  uint64_t ForwardWorkingBytes(int begin, int end, int microbatch) const;
  uint64_t BackwardWorkingBytes(int begin, int end, int microbatch, bool first) const;
  // Whether BackwardWorkingBytes(first = true) includes the pack's
  // gradients (profiles that measured the first microbatch's peak).
  bool first_working_has_gradients() const { return first_peaks_; }

 private:
  CostModel() = default;
  LayerCost Compute(int layer, int microbatch) const;  // Uncached.
  double PackSeconds(bool backward, int begin, int end, int microbatch, bool alone) const;
  void Precompute();
  // Bytes of `layer`'s inputs produced before `begin` (each tensor once).
  uint64_t InputBytesFromBefore(int layer, int begin, int microbatch) const;
  // The backward's transient beyond weights, gradients and the pack's
  // input, at its highest; without the arriving gradients when `seed_held`.
  uint64_t BackwardTop(int begin, int end, int microbatch, bool seed_held, bool first) const;

  // Costs and prefix sums of times for microbatches 1..kCached.
  static constexpr int kCached = 256;
  std::vector<LayerCost> table_;          // [(u - 1) * layers + l].
  // Of the chained times (LayerCost::forward_chained; a pack's first
  // vLayer is its own time, from table_): [(u - 1) * (layers + 1) + l].
  std::vector<double> forward_chained_prefix_;
  std::vector<double> backward_chained_prefix_;
  std::vector<double> forward_alone_chained_prefix_;
  std::vector<double> backward_alone_chained_prefix_;
  int busy_neighbours_ = 0;
  // Measured step hand-offs by microbatch size (proto step_handoff_s > 0).
  std::map<int, double> step_handoff_;

  struct Row {
    int size;
    LayerCost cost;
  };
  // An activation slot: bytes(u) = fixed + per_sample * u.
  struct Slot {
    uint64_t fixed = 0;
    uint64_t per_sample = 0;
    bool floating = true;
    uint64_t Bytes(int u) const { return fixed + per_sample * static_cast<uint64_t>(u); }
  };
  std::vector<std::vector<Slot>> in_slots_, out_slots_;  // Per layer.
  std::vector<LayerSizes> sizes_;
  std::vector<std::vector<Row>> rows_;  // Per layer, increasing size.
  // Per layer: its inputs as (producer, output index); producer -1 is
  // forward's argument. Empty when the profile has no decomposition (a
  // synthesized one): vLayers then form a chain.
  std::vector<std::vector<std::pair<int, int>>> inputs_;
  LinkBandwidths bandwidths_;
  NetworkModel network_;
  uint64_t device_memory_ = 0;
  int max_forward_ = 0;
  int max_backward_ = 0;
  int min_ = 1;
  bool batch_statistics_ = false;
  uint64_t target_bytes_per_sample_ = 0;
  bool uses_rng_ = false;
  bool measured_saved_ = false;  // The profile has saved_bytes.
  bool measured_kept_ = false;   // ...and kept_bytes.
  bool peak_with_gradients_ = false;  // Backward peaks hold the gradients.
  bool first_peaks_ = false;          // ...and backward_first_peak is measured.
};

}  // namespace harmony::planner

#endif  // HARMONY_PLANNER_SEARCH_COST_MODEL_H_
