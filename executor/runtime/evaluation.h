// Evaluation (docs/DESIGN.md §6.9): the mean loss of a validation set,
// computed forward-only with the model in eval mode (dropout off, BatchNorm
// on its running statistics), through the plan's packs on its devices.
//
// Each evaluation minibatch (the plan's minibatch B, this server's slice of
// the world's) is split into the plan's backward microbatches, dealt round
// robin to the devices; each device runs the backward packs in order
// (together they cover every vLayer, and each was planned to fit a device
// with its backward), swapping each pack's weights in just in time (the next
// pack's prefetched during this one when the plan prefetches) for its
// microbatches and keeping nothing for a backward: no stash, no gradients.
// Values a later pack reads wait on the host. A microbatch's loss is scaled
// by size / B and the scaled losses summed in microbatch order, as a
// training iteration reports its loss; the evaluation's loss is the mean
// over its minibatches (over the world: the mean of the servers').
//
// The eval-mode vLayers are the model decomposed again at the plan's cut
// points after module.eval(): the `training` flag is a constant of each
// vLayer's graph (common/decomposer.h), and nothing else changes.
//
// Thread-safety: Run is called by one thread between training iterations
// (the host store is not being updated); it runs a thread per device.

#ifndef HARMONY_EXECUTOR_RUNTIME_EVALUATION_H_
#define HARMONY_EXECUTOR_RUNTIME_EVALUATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "common/decomposer.h"
#include "common/loss.h"
#include "executor/runtime/data_loader.h"
#include "executor/runtime/device.h"
#include "executor/runtime/host_link.h"
#include "executor/runtime/host_store.h"
#include "executor/runtime/metrics.h"
#include "executor/runtime/world.h"
#include "plan/task_graph.h"

namespace harmony::executor {

struct EvalSetup {
  // The model's vLayers in eval mode, the same cuts and live values as the
  // training ones (CheckEvalDecomposition).
  std::unique_ptr<common::Decomposition> dec;
  std::vector<plan::PackRange> packs;  // Covering every vLayer, in order.
  int minibatch = 1;
  int microbatch = 1;
  // Per pack: its weights come during the pack before (the plan's
  // backward packs that prefetch); empty: none does.
  std::vector<bool> prefetch;
  common::LossKind loss_kind = common::LossKind::kAuto;
  int threads_per_device = 1;
  bool flush_denormal = false;
  uint64_t seed = 0;  // Random draws in eval mode (rare), per vLayer and microbatch.
  bool bf16 = false;  // A bf16 plan: autocast, and bf16 weights where bf16_params.
  std::vector<std::vector<bool>> bf16_params;  // common/precision.h, per vLayer.
};

// FailedPrecondition naming the first vLayer whose parameters, buffers,
// live-ins or outputs differ between the two decompositions.
absl::Status CheckEvalDecomposition(const common::Decomposition& train,
                                    const common::Decomposition& eval);

class Evaluator {
 public:
  Evaluator(EvalSetup setup, std::vector<Device*> devices, const HostStore* host,
            HostLink* link, std::mutex* rng_mu);

  // Evaluates `minibatches` minibatches of `data` (from its first). Stops
  // with Cancelled between minibatches when `cancelled` says so.
  absl::StatusOr<EvalMetrics> Run(MinibatchLoader& data, int64_t minibatches, const World& world,
                                  const std::function<bool()>& cancelled);

 private:
  struct PackWeights;
  struct Counters;
  using Values = std::map<std::pair<int, int>, c10::IValue>;

  // Device d's share of one minibatch; its microbatches' scaled losses into
  // `losses` (by microbatch).
  absl::Status RunDevice(int d, int64_t index, const Minibatch& batch, bool takes_targets,
                         std::vector<double>& losses, Counters& counters);
  absl::StatusOr<std::shared_ptr<PackWeights>> LoadPack(int d, int pack, Counters& counters);

  EvalSetup setup_;
  std::vector<Device*> devices_;
  const HostStore* host_;
  HostLink* link_;
  std::mutex* rng_mu_;
  // last_reader_[(k, i)]: the last vLayer reading output i of vLayer k (or
  // argument i with k = -1); the model's output counts as read at the end.
  std::map<std::pair<int, int>, int> last_reader_;
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_RUNTIME_EVALUATION_H_
