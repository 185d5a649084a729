#include "proto/testing/sample_plan.h"

#include <string>

namespace harmony::proto::testing {
namespace {

void SetTensor(TensorMeta* t, const std::string& name, int64_t batch,
               int64_t width) {
  t->set_name(name);
  t->add_shape(batch);
  t->add_shape(width);
  t->set_dtype(FLOAT32);
  t->set_batched(true);
  t->set_bytes(static_cast<uint64_t>(batch * width * 4));
}

void SetPack(Pack* pack, uint32_t begin, uint32_t end) {
  pack->set_begin(begin);
  pack->set_end(end);
}

}  // namespace

Plan MakeSamplePlan() {
  Plan plan;
  plan.set_schema_version(1);
  plan.set_created_by("harmony-plan test");
  plan.mutable_created_at()->set_seconds(1795000000);
  plan.mutable_created_at()->set_nanos(5000);

  ModelIdentity* model = plan.mutable_model();
  model->set_sha256(std::string(64, 'a'));
  model->set_file_name("mlp.pt");
  model->set_file_bytes(123456);
  model->set_loss(CROSS_ENTROPY);
  SetTensor(model->add_sample_inputs(), "x", 8, 32);
  TensorMeta* target = model->add_sample_targets();
  target->set_name("y");
  target->add_shape(8);
  target->set_dtype(INT64);
  target->set_batched(true);
  target->set_bytes(64);
  Decomposition* dec = model->mutable_decomposition();
  dec->set_granularity(4);
  dec->set_vlayer_count(4);
  for (uint32_t i = 0; i < 4; ++i) {
    dec->add_cut_points(i * 3);
    VLayer* v = dec->add_vlayers();
    v->set_index(i);
    v->set_scope("layers." + std::to_string(i));
    v->set_node_begin(i * 3);
    v->set_node_end(i * 3 + 3);
    v->add_parameters("layers." + std::to_string(i) + ".weight");
    v->add_parameters("layers." + std::to_string(i) + ".bias");
    TensorRef* in = v->add_inputs();
    in->set_producer(static_cast<int32_t>(i) - 1);
    in->set_index(0);
    v->set_num_outputs(1);
    v->set_uses_rng(i == 1);
  }

  Profile* profile = plan.mutable_profile();
  profile->set_device_kind("cpu");
  profile->set_device_name("virtual cpu device");
  profile->set_device_memory_bytes(512ull << 20);
  profile->set_optimizer("sgd");
  profile->mutable_bandwidths()->set_host_to_device_bytes_per_s(1.2e10);
  profile->mutable_bandwidths()->set_device_to_host_bytes_per_s(1.1e10);
  profile->mutable_bandwidths()->set_host_link_all_devices_bytes_per_s(1.3e10);
  profile->mutable_bandwidths()->set_peer_bytes_per_s(8.2e9);
  profile->set_max_forward_microbatch(64);
  profile->set_max_backward_microbatch(32);
  for (uint32_t i = 0; i < 4; ++i) {
    VLayerProfile* v = profile->add_vlayers();
    v->set_vlayer(i);
    v->set_parameter_bytes(4224);
    v->set_gradient_bytes(4224);
    v->set_optimizer_state_bytes(4224);
    v->set_update_time_s(1.5e-5);
    for (uint32_t u : {1u, 2u, 4u}) {
      MicrobatchProfile* m = v->add_by_microbatch();
      m->set_size(u);
      m->set_forward_time_s(1e-4 * u);
      m->set_backward_time_s(3e-4 * u);
      m->set_forward_peak_bytes(10000 * u);
      m->set_backward_peak_bytes(25000 * u);
      SetTensor(m->add_inputs(), "x", u, 32);
      SetTensor(m->add_outputs(), "y", u, 32);
    }
  }

  Configuration* config = plan.mutable_config();
  config->set_mode(VPP);
  config->set_schedule(HARMONY);
  config->set_num_devices(2);
  config->set_device_memory_bytes(512ull << 20);
  config->set_minibatch(8);
  config->set_forward_microbatch(4);
  config->set_backward_microbatch(2);
  config->set_optimizer("sgd");
  SetPack(config->add_forward_packs(), 0, 2);
  SetPack(config->add_backward_packs(), 0, 2);
  SetPack(config->add_backward_packs(), 2, 4);

  // Device 0: forward of pack 0, then backward of pack 0.
  // Device 1: fused forward+loss+backward of pack 1.
  DeviceSchedule* d0 = plan.add_devices();
  d0->set_device(0);
  Task* fwd = d0->add_tasks();
  fwd->set_id(0);
  fwd->set_kind(FORWARD);
  fwd->set_pack(0);
  SetPack(fwd->mutable_vlayers(), 0, 2);
  fwd->set_device(0);
  for (uint32_t i = 0; i < 2; ++i) {
    Microbatch* mb = fwd->add_microbatches();
    mb->set_index(i);
    mb->set_offset(i * 4);
    mb->set_size(4);
  }
  Transfer* w = fwd->add_transfers();
  w->set_kind(WEIGHTS_IN);
  w->set_channel(HOST);
  SetPack(w->mutable_vlayers(), 0, 2);
  w->set_microbatch(-1);
  w->set_peer_device(-1);
  w->set_peer_task(-1);
  w->set_bytes(8448);
  Transfer* y = fwd->add_transfers();
  y->set_kind(ACTIVATIONS_OUT);
  y->set_channel(PEER);
  TensorRef* yref = y->add_tensors();
  yref->set_producer(1);
  yref->set_index(0);
  y->set_microbatch(0);
  y->set_peer_device(1);
  y->set_peer_task(1);
  y->set_bytes(512);

  DeviceSchedule* d1 = plan.add_devices();
  d1->set_device(1);
  Task* fused = d1->add_tasks();
  fused->set_id(1);
  fused->set_kind(BACKWARD);
  fused->set_pack(1);
  SetPack(fused->mutable_vlayers(), 2, 4);
  fused->set_device(1);
  fused->set_fused_loss(true);
  fused->add_depends_on(0);
  Transfer* x = fused->add_transfers();
  x->set_kind(ACTIVATIONS_IN);
  x->set_channel(PEER);
  x->set_microbatch(0);
  x->set_peer_device(0);
  x->set_peer_task(0);
  x->set_bytes(512);
  Transfer* g = fused->add_transfers();
  g->set_kind(GRADIENTS_OUT);
  g->set_channel(HOST);
  SetPack(g->mutable_vlayers(), 2, 4);
  g->set_microbatch(-1);
  g->set_peer_device(-1);
  g->set_peer_task(3);
  g->set_bytes(8448);

  Task* bwd = d0->add_tasks();
  bwd->set_id(2);
  bwd->set_kind(BACKWARD);
  bwd->set_pack(0);
  SetPack(bwd->mutable_vlayers(), 0, 2);
  bwd->set_device(0);
  Transfer* keep = bwd->add_transfers();
  keep->set_kind(KEEP_RESIDENT);
  keep->set_channel(LOCAL);
  SetPack(keep->mutable_vlayers(), 0, 2);
  keep->set_microbatch(-1);

  Task* update = plan.add_host_tasks();
  update->set_id(3);
  update->set_kind(UPDATE);
  update->set_pack(1);
  SetPack(update->mutable_vlayers(), 2, 4);
  update->set_device(1);
  update->add_depends_on(1);

  Estimates* est = plan.mutable_estimates();
  est->set_iteration_time_s(0.0123);
  est->set_samples_per_s(650.4);
  est->add_device_peak_bytes(300000);
  est->add_device_peak_bytes(280000);
  est->set_host_memory_bytes(1 << 20);
  est->mutable_swap()->set_weights_in(16896);
  est->mutable_swap()->set_gradients_out(16896);
  est->mutable_swap()->set_stash_out(1024);
  est->mutable_swap()->set_stash_in(1024);
  est->mutable_swap()->set_peer(2048);
  est->mutable_ondemand_swap()->set_weights_in(16896 * 4);
  return plan;
}

}  // namespace harmony::proto::testing
