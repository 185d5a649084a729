#include "executor/runtime/routes.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace harmony::executor {

using plan::PackRange;
using plan::Task;
using plan::TaskKind;
using plan::Transfer;
using plan::TransferKind;

absl::StatusOr<Routes> Routes::Create(const plan::TaskGraph& graph,
                                      const common::Decomposition& dec,
                                      const proto::Profile& profile) {
  Routes r;
  r.dec_ = &dec;
  r.readers_.resize(dec.num_vlayers());
  for (const common::VLayerInfo& v : dec.vlayers()) {
    for (const common::ValueSource& s : v.inputs) {
      if (s.producer >= 0) r.readers_[s.producer][s.index].insert(v.index);
    }
  }
  // Which outputs are batched, from every profiled size.
  for (const proto::VLayerProfile& v : profile.vlayers()) {
    std::vector<bool> b;
    for (int i = 0; i < v.by_microbatch_size(); ++i) {
      const auto& m = v.by_microbatch(i);
      b.resize(std::max<size_t>(b.size(), m.outputs_size()), true);
      for (int o = 0; o < m.outputs_size(); ++o) {
        const proto::TensorMeta& t = m.outputs(o);
        if (t.shape_size() == 0 || t.shape(0) != static_cast<int64_t>(m.size())) b[o] = false;
      }
    }
    r.batched_.push_back(std::move(b));
  }
  for (const Task& t : graph.tasks) {
    // A kept pack's backward reads no data: its forward did (Config::keep).
    const bool kept = t.kind == TaskKind::kBackward && graph.config.Keeps(t.pack);
    r.data_[t.id] = kept ? std::vector<Ref>{} : r.Between({-1, 0}, t.vlayers);
    for (const Transfer& x : t.transfers) {
      if (x.kind != TransferKind::kActivationsOut && x.kind != TransferKind::kStashOut) continue;
      if (x.peer_task < 0 || x.peer_task >= static_cast<int>(graph.tasks.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "malformed plan: task ", t.id, " sends to task ", x.peer_task, ", which does not exist"));
      }
      const Task& to = graph.tasks[x.peer_task];
      std::vector<Ref>& refs = r.routes_[{t.id, x.peer_task, static_cast<int>(x.kind)}];
      if (x.kind == TransferKind::kStashOut) {
        refs = r.Between({0, to.vlayers.begin}, to.vlayers);
      } else if (t.kind == TaskKind::kBackward) {
        refs = r.Between(to.vlayers, t.vlayers);
      } else {
        refs = r.Between(t.vlayers, to.vlayers);
      }
    }
  }
  return r;
}

std::vector<Ref> Routes::Between(PackRange producer, PackRange consumer) const {
  std::set<Ref> refs;
  for (int k = consumer.begin; k < consumer.end; ++k) {
    for (const common::ValueSource& s : dec_->vlayers()[k].inputs) {
      const bool inside = producer.begin < 0
                              ? s.producer < 0
                              : s.producer >= producer.begin && s.producer < producer.end;
      if (inside && !(s.producer >= consumer.begin && s.producer < consumer.end)) {
        refs.insert({s.producer, s.index});
      }
    }
  }
  return {refs.begin(), refs.end()};
}

absl::StatusOr<const std::vector<Ref>*> Routes::Of(const Task& t, const Transfer& x) const {
  return common::Lookup(routes_, std::make_tuple(t.id, x.peer_task, static_cast<int>(x.kind)),
                        [&] { return absl::StrCat("the values task ", t.id, " sends to task ",
                                                  x.peer_task); });
}

absl::StatusOr<const std::vector<Ref>*> Routes::DataOf(const Task& t) const {
  return common::Lookup(data_, t.id,
                        [&] { return absl::StrCat("the data task ", t.id, " reads"); });
}

bool Routes::ReadBetween(const Ref& ref, int k, int end) const {
  if (ref.first < 0 || ref.first >= static_cast<int>(readers_.size())) return false;
  const auto it = readers_[ref.first].find(ref.second);
  if (it == readers_[ref.first].end()) return false;
  const auto next = it->second.upper_bound(k);
  return next != it->second.end() && *next < end;
}

bool Routes::IsBatched(const Ref& r, const c10::IValue& v, int size) const {
  if (!v.isTensor()) return false;
  const at::Tensor& t = v.toTensor();
  if (r.first < 0) return true;  // The data.
  if (r.first < static_cast<int>(batched_.size()) &&
      r.second < static_cast<int>(batched_[r.first].size())) {
    return batched_[r.first][r.second];
  }
  return t.dim() > 0 && t.size(0) == size;
}

}  // namespace harmony::executor
