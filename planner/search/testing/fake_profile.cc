#include "planner/search/testing/fake_profile.h"

namespace harmony::planner::testing {
namespace {

void Meta(proto::TensorMeta* t, uint64_t per_sample, int u) {
  t->add_shape(u);
  t->add_shape(static_cast<int64_t>(per_sample / 4));
  t->set_dtype(proto::FLOAT32);
  t->set_batched(true);
  t->set_bytes(per_sample * u);
}

}  // namespace

proto::ProfileFile MakeFakeProfile(const FakeProfileOptions& o) {
  proto::ProfileFile file;
  file.set_schema_version(1);
  proto::Decomposition* dec = file.mutable_model()->mutable_decomposition();
  dec->set_vlayer_count(o.layers);
  proto::Profile* p = file.mutable_profile();
  p->set_device_kind("cpu");
  p->set_device_memory_bytes(o.device_memory);
  p->set_num_devices(4);
  p->set_optimizer("sgd");
  p->set_max_forward_microbatch(o.max_microbatch);
  p->set_max_backward_microbatch(o.max_microbatch);
  p->set_backward_peak_with_gradients(o.dense_fresh_gradients);
  p->mutable_bandwidths()->set_host_to_device_bytes_per_s(o.bandwidth);
  p->mutable_bandwidths()->set_device_to_host_bytes_per_s(o.bandwidth);
  p->mutable_bandwidths()->set_host_link_all_devices_bytes_per_s(o.bandwidth);
  p->mutable_bandwidths()->set_peer_bytes_per_s(o.bandwidth);
  const uint64_t a = o.activation_bytes;
  for (int l = 0; l < o.layers; ++l) {
    const bool last = l == o.layers - 1;
    proto::VLayer* v = dec->add_vlayers();
    v->set_index(l);
    proto::TensorRef* in = v->add_inputs();
    in->set_producer(l - 1);
    in->set_index(0);
    if (last && o.skip_from >= 0) {
      proto::TensorRef* skip = v->add_inputs();
      skip->set_producer(o.skip_from);
      skip->set_index(0);
    }
    v->set_num_outputs(1);
    proto::VLayerProfile* vp = p->add_vlayers();
    vp->set_vlayer(l);
    vp->set_parameter_bytes(o.parameter_bytes);
    vp->set_gradient_bytes(o.parameter_bytes);
    vp->set_optimizer_state_bytes(o.parameter_bytes);
    vp->set_update_time_s(o.update_s);
    for (int u = 1; u <= o.max_microbatch; u *= 2) {
      proto::MicrobatchProfile* m = vp->add_by_microbatch();
      m->set_size(u);
      m->set_forward_fits(true);
      m->set_backward_fits(true);
      m->set_forward_time_s(o.forward_s_per_sample * u);
      m->set_backward_time_s(o.forward_s_per_sample * u * o.backward_factor);
      m->set_forward_peak_bytes(o.parameter_bytes + 3 * a * u);
      m->set_backward_peak_bytes(2 * o.parameter_bytes + 4 * a * u);
      if (o.dense_fresh_gradients) {
        m->set_backward_peak_bytes(3 * o.parameter_bytes + 4 * a * u);
        m->set_backward_first_peak_bytes(2 * o.parameter_bytes + 4 * a * u);
        m->set_saved_bytes(a * u);
      }
      Meta(m->add_inputs(), a, u);
      if (last && o.skip_from >= 0) Meta(m->add_inputs(), a, u);
      Meta(m->add_outputs(), last ? 4 : a, last ? 1 : u);
      if (last) m->mutable_outputs(0)->set_batched(false);
    }
  }
  return file;
}

}  // namespace harmony::planner::testing
