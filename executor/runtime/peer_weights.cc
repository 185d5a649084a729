#include "executor/runtime/peer_weights.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace harmony::executor {

using plan::Channel;
using plan::Task;
using plan::Transfer;
using plan::TransferKind;

namespace {

absl::Status Stopped() { return absl::CancelledError("stopped: another task failed"); }

}  // namespace

absl::StatusOr<std::unique_ptr<PeerWeights>> PeerWeights::Create(const plan::TaskGraph& graph,
                                                                  int num_devices) {
  auto p = std::make_unique<PeerWeights>();
  // From its task at the same place in the source device's list (the same
  // pack and kind), which swaps them in from the host.
  p->position_.assign(graph.tasks.size(), -1);
  std::map<int, std::vector<int>> lists;
  for (int d = 0; d < num_devices; ++d) {
    lists[d] = graph.DeviceTasks(d);
    for (size_t i = 0; i < lists[d].size(); ++i) {
      p->position_[lists[d][i]] = static_cast<int>(i);
    }
  }
  for (const Task& t : graph.tasks) {
    for (const Transfer& x : t.transfers) {
      if (x.kind != TransferKind::kWeightsIn || x.channel != Channel::kPeer) continue;
      const auto list = lists.find(x.peer_device);
      const int at = p->position_[t.id];
      const Task* source = list != lists.end() && x.peer_device != t.device && at >= 0 &&
                                   at < static_cast<int>(list->second.size())
                               ? &graph.tasks[list->second[at]]
                               : nullptr;
      if (source == nullptr || source->pack != t.pack || source->kind != t.kind ||
          !(source->vlayers == t.vlayers)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "malformed plan: task ", t.id, " copies its weights from device ", x.peer_device,
            ", which has no task of the same pack there"));
      }
      p->source_[t.id] = source->id;
      ++p->copies_[source->id];
    }
  }
  return p;
}

std::optional<int> PeerWeights::SourceOf(int task) const {
  const auto it = source_.find(task);
  if (it == source_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<int> PeerWeights::WaitForRoom(int device, int room_of) {
  int waited_for = -1;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] {
    if (stopped_) return true;
    for (const auto& [source, shared] : shared_) {
      if (shared.device == device && shared.position <= room_of) {
        waited_for = source;
        return false;
      }
    }
    return true;
  });
  if (stopped_) return Stopped();
  return waited_for;
}

absl::StatusOr<PeerWeights::Published> PeerWeights::Take(int source) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return stopped_ || shared_.count(source) > 0; });
  if (stopped_) return Stopped();
  const Shared& s = shared_.at(source);  // Present: the wait saw it.
  return Published{s.params, s.device};
}

void PeerWeights::Taken(int source) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = shared_.find(source);
  if (it != shared_.end() && --it->second.remaining <= 0) shared_.erase(it);
  cv_.notify_all();
}

void PeerWeights::Publish(int task, int device,
                          const std::vector<std::vector<at::Tensor>>& params) {
  const auto copies = copies_.find(task);
  if (copies == copies_.end()) return;
  Shared shared;
  shared.device = device;
  shared.position = task < static_cast<int>(position_.size()) ? position_[task] : 0;
  shared.remaining = copies->second;
  for (const auto& ps : params) {
    std::vector<at::Tensor> detached;
    for (const at::Tensor& p : ps) detached.push_back(p.detach());
    shared.params.push_back(std::move(detached));
  }
  std::lock_guard<std::mutex> lock(mu_);
  shared_[task] = std::move(shared);
  cv_.notify_all();
}

void PeerWeights::StartIteration() {
  std::lock_guard<std::mutex> lock(mu_);
  shared_.clear();
  stopped_ = false;
}

void PeerWeights::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  shared_.clear();
  cv_.notify_all();
}

}  // namespace harmony::executor
