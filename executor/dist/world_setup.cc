#include "executor/dist/world_setup.h"

#include <cstring>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace harmony::executor {

World MakeWorld(Collective& collective, bool shard_optimizer_state) {
  World w;
  w.rank = collective.rank();
  w.size = collective.world_size();
  w.shard_optimizer_state = shard_optimizer_state;
  Collective* c = &collective;
  w.all_reduce_sum = [c](at::Tensor& t) {
    std::vector<at::Tensor> v = {t};
    return c->AllReduceSum(v);
  };
  w.reduce_sum_to = [c](at::Tensor& t, int root) {
    std::vector<at::Tensor> v = {t};
    return c->ReduceSumTo(v, root);
  };
  w.broadcast = [c](at::Tensor& t, int root) {
    std::vector<at::Tensor> v = {t};
    return c->Broadcast(v, root);
  };
  return w;
}

namespace {

at::Tensor ToBytes(const std::string& s) {
  at::Tensor t = at::empty({static_cast<int64_t>(s.size())}, at::kByte);
  if (!s.empty()) std::memcpy(t.data_ptr<uint8_t>(), s.data(), s.size());
  return t;
}

std::string FromBytes(const at::Tensor& t) {
  return std::string(reinterpret_cast<const char*>(t.data_ptr<uint8_t>()),
                     static_cast<size_t>(t.numel()));
}

}  // namespace

absl::StatusOr<std::string> ShareBytes(Collective& collective, const std::string& bytes,
                                       int root) {
  std::vector<at::Tensor> size = {
      at::full({1}, static_cast<int64_t>(collective.rank() == root ? bytes.size() : 0), at::kLong)};
  HARMONY_RETURN_IF_ERROR(collective.Broadcast(size, root));
  const int64_t n = size[0].item<int64_t>();
  if (n == 0) return std::string();
  std::vector<at::Tensor> data = {collective.rank() == root ? ToBytes(bytes)
                                                            : at::empty({n}, at::kByte)};
  HARMONY_RETURN_IF_ERROR(collective.Broadcast(data, root));
  return FromBytes(data[0]);
}

absl::Status CheckSameEverywhere(Collective& collective,
                                 const std::vector<std::pair<std::string, std::string>>& fields) {
  // Every rank's values, one rank after another from rank 0.
  std::vector<std::string> all(collective.world_size());
  for (int r = 0; r < collective.world_size(); ++r) {
    std::string mine;
    if (r == collective.rank()) {
      std::vector<std::string> parts;
      for (const auto& [name, value] : fields) parts.push_back(absl::StrCat(name, "=", value));
      mine = absl::StrJoin(parts, "\n");
    }
    HARMONY_ASSIGN_OR_RETURN(all[r], ShareBytes(collective, mine, r));
  }
  for (int r = 1; r < collective.world_size(); ++r) {
    if (all[r] == all[0]) continue;
    std::vector<std::string> a = absl::StrSplit(all[0], '\n');
    std::vector<std::string> b = absl::StrSplit(all[r], '\n');
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      const std::string x = i < a.size() ? a[i] : "(none)";
      const std::string y = i < b.size() ? b[i] : "(none)";
      if (x == y) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "the servers do not run the same job: rank ", r, " has ", y, ", rank 0 has ", x));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> AnyRank(Collective& collective, bool mine) {
  std::vector<at::Tensor> flag = {at::full({1}, mine ? 1.0f : 0.0f, at::kFloat)};
  HARMONY_RETURN_IF_ERROR(collective.AllReduceSum(flag));
  return flag[0].item<float>() > 0;
}

}  // namespace harmony::executor
