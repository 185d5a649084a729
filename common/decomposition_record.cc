#include "common/decomposition_record.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/decomposer.h"

namespace harmony::common {
proto::Decomposition RecordDecomposition(const Decomposition& d, int granularity) {
  proto::Decomposition dec;
  dec.set_granularity(granularity);
  dec.set_vlayer_count(d.num_vlayers());
  for (int cut : d.cut_points()) dec.add_cut_points(cut);
  for (const VLayerInfo& v : d.vlayers()) {
    proto::VLayer* pv = dec.add_vlayers();
    pv->set_index(v.index);
    pv->set_scope(v.scope);
    pv->set_node_begin(v.node_begin);
    pv->set_node_end(v.node_end);
    for (const std::string& p : v.parameters) pv->add_parameters(p);
    for (const std::string& b : v.buffers) pv->add_buffers(b);
    for (const ValueSource& s : v.inputs) {
      proto::TensorRef* ref = pv->add_inputs();
      ref->set_producer(s.producer);
      ref->set_index(s.index);
    }
    pv->set_num_outputs(v.num_outputs());
    pv->set_uses_rng(v.uses_rng);
    pv->set_updates_buffers(v.updates_buffers);
  }
  return dec;
}

absl::Status CheckDecompositionRecord(const Decomposition& d,
                                      const proto::Decomposition& record) {
  if (record.vlayers_size() == 0) return absl::OkStatus();
  const std::string again =
      "; was the plan made by another version of harmony-plan? Plan again with this one";
  if (record.vlayers_size() != d.num_vlayers()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the plan records ", record.vlayers_size(), " vLayers, its cut points make ",
        d.num_vlayers(), " of this model", again));
  }
  for (int k = 0; k < d.num_vlayers(); ++k) {
    const VLayerInfo& v = d.vlayers()[k];
    const proto::VLayer& r = record.vlayers(k);
    const std::vector<std::string> params(r.parameters().begin(), r.parameters().end());
    const std::vector<std::string> buffers(r.buffers().begin(), r.buffers().end());
    std::string differs;
    if (static_cast<int>(r.node_begin()) != v.node_begin ||
        static_cast<int>(r.node_end()) != v.node_end) {
      differs = absl::StrCat("covers graph nodes ", v.node_begin, "-", v.node_end,
                             " here, ", r.node_begin(), "-", r.node_end(), " in the plan");
    } else if (params != v.parameters || buffers != v.buffers) {
      differs = absl::StrCat("reads ", v.parameters.size(), " parameters and ",
                             v.buffers.size(), " buffers here, ", params.size(),
                             " and ", buffers.size(), " in the plan, or others");
    }
    if (!differs.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the plan's decomposition does not match this model's: vLayer ", k, " (",
          r.scope().empty() ? "the model" : r.scope(), ") ", differs, again));
    }
  }
  return absl::OkStatus();
}

}  // namespace harmony::common
