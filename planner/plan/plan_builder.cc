#include "planner/plan/plan_builder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/units.h"

namespace harmony::planner {
namespace {

using plan::ToProto;

void SetPack(proto::Pack* p, const PackRange& r) {
  p->set_begin(r.begin);
  p->set_end(r.end);
}

void SetTask(proto::Task* out, const Task& t) {
  out->set_id(t.id);
  out->set_kind(ToProto(t.kind));
  out->set_pack(t.pack);
  SetPack(out->mutable_vlayers(), t.vlayers);
  out->set_device(t.device);
  for (const Microbatch& m : t.microbatches) {
    proto::Microbatch* pm = out->add_microbatches();
    pm->set_index(m.index);
    pm->set_offset(m.offset);
    pm->set_size(m.size);
  }
  out->set_fused_loss(t.fused_loss);
  for (const Transfer& x : t.transfers) {
    proto::Transfer* px = out->add_transfers();
    px->set_kind(ToProto(x.kind));
    px->set_channel(ToProto(x.channel));
    SetPack(px->mutable_vlayers(), x.vlayers);
    px->set_microbatch(x.microbatch);
    px->set_peer_device(x.peer_device);
    px->set_peer_task(x.peer_task);
    px->set_bytes(x.bytes);
  }
  for (int d : t.depends_on) out->add_depends_on(d);
}

void SetSwap(proto::SwapBytes* out, const SwapTotals& s) {
  out->set_weights_in(s.weights_in);
  out->set_gradients_out(s.gradients_out);
  out->set_activations_in(s.activations_in + s.data_in);
  out->set_activations_out(s.activations_out);
  out->set_stash_out(s.stash_out);
  out->set_stash_in(s.stash_in);
  out->set_peer(s.peer);
  out->set_kept_out(s.kept_out);
  out->set_kept_in(s.kept_in);
}

uint64_t HostBytes(const proto::SwapBytes& s) {
  return s.weights_in() + s.gradients_out() + s.activations_in() + s.activations_out() +
         s.stash_out() + s.stash_in() + s.kept_out() + s.kept_in();
}

std::string PacksText(const google::protobuf::RepeatedPtrField<proto::Pack>& packs) {
  std::vector<std::string> parts;
  for (const proto::Pack& p : packs) parts.push_back(absl::StrCat(p.begin(), "-", p.end() - 1));
  return parts.empty() ? "none" : absl::StrJoin(parts, " ");
}

}  // namespace

proto::Plan BuildPlan(const proto::ProfileFile& profile, const TaskGraph& graph,
                      const SimResult& sim, const std::optional<SimResult>& ondemand) {
  proto::Plan plan;
  plan.set_schema_version(1);
  plan.set_created_by("harmony-plan 0.1");
  *plan.mutable_model() = profile.model();
  *plan.mutable_profile() = profile.profile();
  const Config& c = graph.config;
  proto::Configuration* config = plan.mutable_config();
  config->set_mode(c.mode == Mode::kVpp ? proto::VPP : proto::VDP);
  config->set_schedule(ToProto(c.schedule));
  config->set_num_devices(c.num_devices);
  config->set_device_memory_bytes(c.device_memory);
  config->set_minibatch(c.minibatch);
  config->set_forward_microbatch(c.forward_microbatch);
  config->set_backward_microbatch(c.backward_microbatch);
  for (const PackRange& p : c.forward_packs) SetPack(config->add_forward_packs(), p);
  for (const PackRange& p : c.backward_packs) SetPack(config->add_backward_packs(), p);
  config->set_optimizer(profile.profile().optimizer());
  config->set_single_buffer(!c.prefetch);
  config->set_precision(profile.profile().precision() == proto::BF16 ? proto::BF16 : proto::FP32);
  config->set_fp32_gradients(profile.profile().fp32_gradients());
  config->set_local_activations(c.local_activations);
  config->set_peer_weights(c.peer_weights);
  config->set_waves(static_cast<uint32_t>(std::max(1, c.waves)));
  config->set_host_outputs_pending(static_cast<uint32_t>(std::max(0, c.host_outputs_pending)));
  config->set_inputs_ahead(static_cast<uint32_t>(std::max(0, c.inputs_ahead)));
  if (!c.backward_pack_microbatch.empty()) {
    for (size_t p = 0; p < c.backward_packs.size(); ++p) {
      config->add_backward_pack_microbatches(
          static_cast<uint32_t>(c.BackwardMicrobatch(static_cast<int>(p))));
    }
  }
  for (size_t p = 0; p < c.host_sums.size(); ++p) {
    if (c.host_sums[p]) config->add_host_summed_packs(static_cast<uint32_t>(p));
  }
  for (size_t p = 0; p < c.keep.size(); ++p) {
    if (c.keep[p]) config->add_kept_packs(static_cast<uint32_t>(p));
  }
  for (size_t p = 0; p < c.late_forward.size(); ++p) {
    if (c.late_forward[p]) config->add_late_forward_packs(static_cast<uint32_t>(p));
  }
  for (size_t p = 0; p < c.late_backward.size(); ++p) {
    if (c.late_backward[p]) config->add_late_backward_packs(static_cast<uint32_t>(p));
  }
  for (int d = 0; d < c.num_devices; ++d) {
    proto::DeviceSchedule* device = plan.add_devices();
    device->set_device(d);
    for (int id : graph.DeviceTasks(d)) SetTask(device->add_tasks(), graph.tasks[id]);
  }
  for (const Task& t : graph.tasks) {
    if (t.kind == TaskKind::kUpdate) SetTask(plan.add_host_tasks(), t);
  }
  proto::Estimates* e = plan.mutable_estimates();
  e->set_iteration_time_s(sim.iteration_s);
  e->set_samples_per_s(sim.iteration_s > 0 ? c.minibatch / sim.iteration_s : 0);
  for (uint64_t p : sim.device_peak) e->add_device_peak_bytes(p);
  e->set_host_memory_bytes(sim.host_memory);
  e->set_compute_s(sim.device_compute_s());
  SetSwap(e->mutable_swap(), sim.swap);
  if (ondemand) SetSwap(e->mutable_ondemand_swap(), ondemand->swap);
  return plan;
}

std::string PlanSummary(const proto::Plan& plan) {
  const proto::Configuration& c = plan.config();
  const proto::Estimates& e = plan.estimates();
  std::string out = absl::StrFormat(
      "plan for %s (%d vLayers): %s, %s, %d device(s) of %s, minibatch %d\n",
      plan.model().file_name(), plan.model().decomposition().vlayer_count(),
      proto::Schedule_Name(c.schedule()), proto::Mode_Name(c.mode()), c.num_devices(),
      common::FormatBytes(c.device_memory_bytes()), c.minibatch());
  if (!plan.model().loss_output_note().empty()) {
    absl::StrAppendFormat(&out, "  loss: %s\n", plan.model().loss_output_note());
  }
  absl::StrAppendFormat(&out, "  microbatches: forward %d, backward %d\n",
                        c.forward_microbatch(), c.backward_microbatch());
  if (c.backward_pack_microbatches_size() > 0) {
    std::vector<std::string> sizes;
    for (int p = 0; p < c.backward_pack_microbatches_size(); ++p) {
      sizes.push_back(absl::StrCat(p, ":", c.backward_pack_microbatches(p)));
    }
    absl::StrAppendFormat(&out, "  backward microbatch per backward pack: %s\n",
                          absl::StrJoin(sizes, " "));
  }
  if (c.precision() == proto::BF16) {
    out += c.fp32_gradients()
               ? "  precision: bf16, gradients fp32 (bf16 weights on the devices and the link, "
                 "autocast compute, gradients summed and returned in fp32, fp32 masters and "
                 "optimizer on the host)\n"
               : "  precision: bf16 (bf16 weights and gradients on the devices and the link, "
                 "autocast compute, fp32 masters and optimizer on the host)\n";
  } else {
    out += "  precision: fp32\n";
  }
  if (c.single_buffer()) {
    out += "  weights single-buffered: each task swaps its own in when it starts (no prefetch)\n";
  }
  if (!c.single_buffer() &&
      (c.late_forward_packs_size() > 0 || c.late_backward_packs_size() > 0)) {
    auto list = [](const auto& packs) {
      std::vector<std::string> xs;
      for (uint32_t p : packs) xs.push_back(absl::StrCat(p));
      return xs.empty() ? std::string("none") : absl::StrJoin(xs, ",");
    };
    absl::StrAppendFormat(&out,
                          "  weights prefetched during the task before, but swapped in when "
                          "their task starts (no room beside the task before) for forward "
                          "pack(s) %s, backward pack(s) %s\n",
                          list(c.late_forward_packs()), list(c.late_backward_packs()));
  }
  if (c.local_activations()) {
    out += "  activations between a device's packs stay on the device\n";
  }
  if (c.peer_weights()) {
    out += "  weights cross the host link once: device 0 swaps them in, the others copy from it\n";
  }
  if (c.waves() > 1) {
    const int base = static_cast<int>(c.minibatch() / c.waves());
    absl::StrAppendFormat(&out,
                          "  waves: %d passes of %s samples, gradients summed on the host, "
                          "one update after the last\n",
                          c.waves(),
                          c.minibatch() % c.waves() == 0 ? absl::StrCat(base)
                                                         : absl::StrCat(base, "-", base + 1));
  }
  if (c.host_outputs_pending() > 0) {
    absl::StrAppendFormat(&out,
                          "  what a task sends to the host held on its device for at most %d "
                          "microbatches: the next waits until it has left\n",
                          c.host_outputs_pending());
  }
  if (c.inputs_ahead() > 0) {
    absl::StrAppendFormat(&out,
                          "  a task's host inputs copied in %d microbatch(es) ahead of the one "
                          "computing (default %d)\n",
                          c.inputs_ahead(), plan::kInputsAhead);
  }
  if (c.host_summed_packs_size() > 0) {
    std::vector<std::string> packs;
    for (uint32_t p : c.host_summed_packs()) packs.push_back(absl::StrCat(p));
    absl::StrAppendFormat(&out,
                          "  gradients summed on the host after each microbatch: backward "
                          "pack(s) %s (too large to accumulate on the device)\n",
                          absl::StrJoin(packs, ", "));
  }
  {
    // Per backward pack but the fused last: keep or recompute.
    std::vector<std::string> choice;
    for (int p = 0; p + 1 < c.backward_packs_size(); ++p) {
      const bool kept = std::find(c.kept_packs().begin(), c.kept_packs().end(),
                                  static_cast<uint32_t>(p)) != c.kept_packs().end();
      choice.push_back(absl::StrCat(p, ":", kept ? "keep" : "recompute"));
    }
    if (!choice.empty()) {
      absl::StrAppendFormat(&out, "  activations per backward pack: %s\n",
                            absl::StrJoin(choice, " "));
    }
  }
  absl::StrAppendFormat(&out, "  forward packs (%d): %s\n", c.forward_packs_size(),
                        PacksText(c.forward_packs()));
  absl::StrAppendFormat(&out, "  backward packs (%d): %s\n", c.backward_packs_size(),
                        PacksText(c.backward_packs()));
  absl::StrAppendFormat(&out, "  estimated iteration: %s, %.2f samples/s",
                        common::FormatTimeSpan(absl::Seconds(e.iteration_time_s())),
                        e.samples_per_s());
  if (e.compute_s() > 0) {
    absl::StrAppendFormat(&out, " (device compute %s, summed over the devices)",
                          common::FormatTimeSpan(absl::Seconds(e.compute_s())));
  }
  out += "\n";
  // The link the estimate was made on: the one harmony-plan was told, else
  // the profile's measurement (as CostModel::Create takes them).
  const proto::Bandwidths& bw = plan.profile().bandwidths();
  double link = c.host_link_bytes_per_s();
  if (!(link > 0)) link = bw.host_link_all_devices_bytes_per_s();
  if (!(link > 0)) link = std::min(bw.host_to_device_bytes_per_s(), bw.device_to_host_bytes_per_s());
  const double latency = c.has_host_link_latency_s() ? c.host_link_latency_s()
                                                     : std::max(0.0, bw.transfer_latency_s());
  if (link > 0) {
    absl::StrAppendFormat(
        &out, "  on a host link of %s per direction shared by the devices, %s per transfer (%s)\n",
        common::FormatBandwidth(link), common::FormatTimeSpan(absl::Seconds(latency)),
        c.host_link_bytes_per_s() > 0 || c.has_host_link_latency_s()
            ? "as harmony-plan was told: --host-link, --host-link-latency"
            : "the profile's measurement");
  }
  for (int d = 0; d < e.device_peak_bytes_size(); ++d) {
    absl::StrAppendFormat(&out, "  device %d peak: %s of %s (%.0f%%)\n", d,
                          common::FormatBytes(e.device_peak_bytes(d)),
                          common::FormatBytes(c.device_memory_bytes()),
                          100.0 * e.device_peak_bytes(d) /
                              std::max<uint64_t>(1, c.device_memory_bytes()));
  }
  if (e.clip_hold_s() > 0 && e.iteration_time_s() > 0) {
    const double t = e.iteration_time_s();
    absl::StrAppendFormat(
        &out,
        "  with gradient clipping: %s speculating (+%.1f%%), %s when it fires (+%.1f%%), %s "
        "holding (+%.1f%%): --clip-mode auto %s\n",
        common::FormatTimeSpan(absl::Seconds(e.clip_speculate_s())),
        100 * (e.clip_speculate_s() / t - 1),
        common::FormatTimeSpan(absl::Seconds(e.clip_speculate_fires_s())),
        100 * (e.clip_speculate_fires_s() / t - 1),
        common::FormatTimeSpan(absl::Seconds(e.clip_hold_s())), 100 * (e.clip_hold_s() / t - 1),
        e.clip_speculate_fires_s() > e.clip_hold_s()
            ? "speculates, and holds after an iteration that clipped"
            : "speculates");
  }
  absl::StrAppendFormat(&out, "  host memory: %s%s\n", common::FormatBytes(e.host_memory_bytes()),
                        c.servers() > 1 ? " per server" : "");
  if (c.servers() > 1) {
    absl::StrAppendFormat(
        &out,
        "  world: %d servers (global minibatch %d), %s network, %s latency; each sends %s per "
        "iteration summing gradients%s\n",
        c.servers(), c.servers() * c.minibatch(), common::FormatBandwidth(c.network_bytes_per_s()),
        common::FormatTimeSpan(absl::Seconds(c.network_latency_s())),
        common::FormatBytes(e.network_bytes_per_server()),
        c.shard_optimizer_state() ? "; optimizer state sharded" : "");
  }
  const uint64_t swap = HostBytes(e.swap());
  absl::StrAppendFormat(
      &out,
      "  swap per iteration: %s over the host link (weights in %s, gradients out %s, "
      "activations %s, stash %s, kept activations %s), %s device to device\n",
      common::FormatBytes(swap), common::FormatBytes(e.swap().weights_in()),
      common::FormatBytes(e.swap().gradients_out()),
      common::FormatBytes(e.swap().activations_in() + e.swap().activations_out()),
      common::FormatBytes(e.swap().stash_out() + e.swap().stash_in()),
      common::FormatBytes(e.swap().kept_out() + e.swap().kept_in()),
      common::FormatBytes(e.swap().peer()));
  if (e.has_ondemand_swap()) {
    const uint64_t od = HostBytes(e.ondemand_swap());
    absl::StrAppendFormat(&out,
                          "  on-demand swapping would move %s: %.1fx more than this plan\n",
                          common::FormatBytes(od),
                          swap > 0 ? static_cast<double>(od) / swap : 0.0);
  }
  return out;
}

std::string PlanTasks(const proto::Plan& plan) {
  std::string out;
  auto line = [&](const proto::Task& t) {
    std::vector<std::string> xs;
    // One entry per kind: the task's own and its first microbatch's (a
    // baseline's later pass holds microbatch 1 alone, say).
    const int first = t.microbatches_size() > 0 ? static_cast<int>(t.microbatches(0).index()) : 0;
    for (const proto::Transfer& x : t.transfers()) {
      if (x.microbatch() >= 0 && x.microbatch() != first) continue;
      std::string s = proto::TransferKind_Name(x.kind());
      if (x.peer_task() >= 0) absl::StrAppend(&s, "->t", x.peer_task());
      absl::StrAppend(&s, " ", common::FormatBytes(x.bytes()));
      xs.push_back(s);
    }
    absl::StrAppendFormat(&out, "  t%-4d %-8s pack %-3d vLayers %d-%d", t.id(),
                          proto::TaskKind_Name(t.kind()), t.pack(), t.vlayers().begin(),
                          t.vlayers().end() - 1);
    if (t.kind() == proto::UPDATE) {
      // The host's update: no microbatches, no transfers; the backward
      // tasks whose gradients it waits for.
      std::vector<std::string> after;
      for (uint32_t dep : t.depends_on()) after.push_back(absl::StrCat("t", dep));
      absl::StrAppend(&out, after.empty() ? "" : absl::StrCat(", after ", absl::StrJoin(after, ", ")),
                      "\n");
      return;
    }
    absl::StrAppendFormat(&out, ", %d microbatch(es)%s%s%s\n", t.microbatches_size(),
                          t.fused_loss() ? ", fused loss" : "", xs.empty() ? "" : ": ",
                          absl::StrJoin(xs, ", "));
  };
  for (const proto::DeviceSchedule& d : plan.devices()) {
    absl::StrAppendFormat(&out, "device %d:\n", d.device());
    for (const proto::Task& t : d.tasks()) line(t);
  }
  absl::StrAppend(&out, "host (CPU optimizer):\n");
  for (const proto::Task& t : plan.host_tasks()) line(t);
  return out;
}

}  // namespace harmony::planner
