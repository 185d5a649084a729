#include "plan/plan_reader.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace harmony::plan {

proto::TransferKind ToProto(TransferKind k) {
  switch (k) {
    case TransferKind::kWeightsIn: return proto::WEIGHTS_IN;
    case TransferKind::kPrefetchWeights: return proto::PREFETCH_WEIGHTS;
    case TransferKind::kGradientsOut: return proto::GRADIENTS_OUT;
    case TransferKind::kActivationsIn: return proto::ACTIVATIONS_IN;
    case TransferKind::kActivationsOut: return proto::ACTIVATIONS_OUT;
    case TransferKind::kStashOut: return proto::STASH_OUT;
    case TransferKind::kStashIn: return proto::STASH_IN;
    case TransferKind::kKeepResident: return proto::KEEP_RESIDENT;
    case TransferKind::kGradientReduce: return proto::GRADIENT_REDUCE;
    case TransferKind::kDataIn: return proto::DATA_IN;
    case TransferKind::kBuffersOut: return proto::BUFFERS_OUT;
    case TransferKind::kKeptOut: return proto::KEPT_OUT;
    case TransferKind::kKeptIn: return proto::KEPT_IN;
  }
  return proto::TRANSFER_KIND_UNSPECIFIED;
}

proto::Channel ToProto(Channel c) {
  switch (c) {
    case Channel::kHost: return proto::HOST;
    case Channel::kPeer: return proto::PEER;
    case Channel::kLocal: return proto::LOCAL;
  }
  return proto::CHANNEL_UNSPECIFIED;
}

proto::TaskKind ToProto(TaskKind k) {
  switch (k) {
    case TaskKind::kForward: return proto::FORWARD;
    case TaskKind::kBackward: return proto::BACKWARD;
    case TaskKind::kUpdate: return proto::UPDATE;
  }
  return proto::TASK_KIND_UNSPECIFIED;
}

proto::Schedule ToProto(Schedule s) {
  switch (s) {
    case Schedule::kHarmony: return proto::HARMONY;
    case Schedule::kOndemand: return proto::ONDEMAND;
    case Schedule::kGpipe: return proto::GPIPE;
    case Schedule::kDpSwap: return proto::DP_SWAP;
  }
  return proto::SCHEDULE_UNSPECIFIED;
}

namespace {

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed plan: ", what));
}

absl::StatusOr<TransferKind> FromProto(proto::TransferKind k) {
  for (TransferKind t : {TransferKind::kWeightsIn, TransferKind::kPrefetchWeights,
                         TransferKind::kGradientsOut, TransferKind::kActivationsIn,
                         TransferKind::kActivationsOut, TransferKind::kStashOut,
                         TransferKind::kStashIn, TransferKind::kKeepResident,
                         TransferKind::kGradientReduce, TransferKind::kDataIn,
                         TransferKind::kBuffersOut, TransferKind::kKeptOut,
                         TransferKind::kKeptIn}) {
    if (ToProto(t) == k) return t;
  }
  return Malformed(absl::StrCat("unknown transfer kind ", static_cast<int>(k)));
}

absl::StatusOr<Task> TaskFromProto(const proto::Task& p, int devices) {
  Task t;
  t.id = static_cast<int>(p.id());
  switch (p.kind()) {
    case proto::FORWARD: t.kind = TaskKind::kForward; break;
    case proto::BACKWARD: t.kind = TaskKind::kBackward; break;
    case proto::UPDATE: t.kind = TaskKind::kUpdate; break;
    default: return Malformed(absl::StrCat("task ", p.id(), " has no kind"));
  }
  t.pack = static_cast<int>(p.pack());
  t.vlayers = {static_cast<int>(p.vlayers().begin()), static_cast<int>(p.vlayers().end())};
  t.device = static_cast<int>(p.device());
  if (t.device >= devices) {
    return Malformed(absl::StrCat("task ", t.id, " is on device ", t.device, " of ", devices));
  }
  for (const proto::Microbatch& m : p.microbatches()) {
    t.microbatches.push_back({static_cast<int>(m.index()), static_cast<int>(m.offset()),
                              static_cast<int>(m.size())});
  }
  t.fused_loss = p.fused_loss();
  for (const proto::Transfer& x : p.transfers()) {
    absl::StatusOr<TransferKind> kind = FromProto(x.kind());
    if (!kind.ok()) return kind.status();
    Channel channel = Channel::kHost;
    if (x.channel() == proto::PEER) channel = Channel::kPeer;
    if (x.channel() == proto::LOCAL) channel = Channel::kLocal;
    t.transfers.push_back({*kind, channel,
                           {static_cast<int>(x.vlayers().begin()),
                            static_cast<int>(x.vlayers().end())},
                           x.microbatch(), x.peer_device(), x.peer_task(), x.bytes()});
  }
  for (uint32_t d : p.depends_on()) t.depends_on.push_back(static_cast<int>(d));
  return t;
}

}  // namespace

absl::StatusOr<TaskGraph> TaskGraphFromPlan(const proto::Plan& plan) {
  const proto::Configuration& pc = plan.config();
  TaskGraph g;
  Config& c = g.config;
  c.mode = pc.mode() == proto::VDP ? Mode::kVdp : Mode::kVpp;
  switch (pc.schedule()) {
    case proto::ONDEMAND: c.schedule = Schedule::kOndemand; break;
    case proto::GPIPE: c.schedule = Schedule::kGpipe; break;
    case proto::DP_SWAP: c.schedule = Schedule::kDpSwap; break;
    default: c.schedule = Schedule::kHarmony; break;
  }
  c.num_devices = static_cast<int>(pc.num_devices());
  c.device_memory = pc.device_memory_bytes();
  c.minibatch = static_cast<int>(pc.minibatch());
  c.forward_microbatch = static_cast<int>(pc.forward_microbatch());
  c.backward_microbatch = static_cast<int>(pc.backward_microbatch());
  c.prefetch = !pc.single_buffer();
  c.local_activations = pc.local_activations();
  c.peer_weights = pc.peer_weights();
  c.waves = std::max(1, static_cast<int>(pc.waves()));
  c.host_outputs_pending = static_cast<int>(pc.host_outputs_pending());
  c.inputs_ahead = static_cast<int>(pc.inputs_ahead());
  for (const proto::Pack& p : pc.forward_packs()) {
    c.forward_packs.push_back({static_cast<int>(p.begin()), static_cast<int>(p.end())});
  }
  for (const proto::Pack& p : pc.backward_packs()) {
    c.backward_packs.push_back({static_cast<int>(p.begin()), static_cast<int>(p.end())});
  }
  if (pc.backward_pack_microbatches_size() > 0) {
    if (pc.backward_pack_microbatches_size() != pc.backward_packs_size()) {
      return Malformed(absl::StrCat("it gives ", pc.backward_pack_microbatches_size(),
                                    " backward pack microbatches for ", pc.backward_packs_size(),
                                    " backward packs"));
    }
    for (uint32_t u : pc.backward_pack_microbatches()) {
      c.backward_pack_microbatch.push_back(static_cast<int>(u));
    }
  }
  for (uint32_t p : pc.host_summed_packs()) {
    if (p >= c.backward_packs.size()) {
      return Malformed(absl::StrCat("it sums the gradients of backward pack ", p,
                                    " on the host; there are ", c.backward_packs.size()));
    }
    c.host_sums.resize(c.backward_packs.size(), false);
    c.host_sums[p] = true;
  }
  for (uint32_t p : pc.kept_packs()) {
    if (p + 1 >= c.backward_packs.size()) {
      return Malformed(absl::StrCat("it keeps the activations of backward pack ", p, "; there are ",
                                    c.backward_packs.size(), " and the last cannot keep"));
    }
    c.keep.resize(c.backward_packs.size(), false);
    c.keep[p] = true;
  }
  auto late = [](const auto& packs, size_t n, const char* kind,
                 std::vector<bool>* out) -> absl::Status {
    for (uint32_t p : packs) {
      if (p >= n) {
        return Malformed(absl::StrCat("it swaps the weights of ", kind, " pack ", p,
                                      " in late; there are ", n));
      }
      out->resize(n, false);
      (*out)[p] = true;
    }
    return absl::OkStatus();
  };
  if (absl::Status s =
          late(pc.late_forward_packs(), c.forward_packs.size(), "forward", &c.late_forward);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          late(pc.late_backward_packs(), c.backward_packs.size(), "backward", &c.late_backward);
      !s.ok()) {
    return s;
  }
  if (c.num_devices < 1 || plan.devices_size() != c.num_devices) {
    return Malformed(absl::StrCat("it has ", plan.devices_size(), " device task lists for ",
                                  c.num_devices, " devices"));
  }
  std::vector<Task> tasks;
  for (const proto::DeviceSchedule& d : plan.devices()) {
    for (const proto::Task& t : d.tasks()) {
      absl::StatusOr<Task> task = TaskFromProto(t, c.num_devices);
      if (!task.ok()) return task.status();
      tasks.push_back(*std::move(task));
    }
  }
  for (const proto::Task& t : plan.host_tasks()) {
    absl::StatusOr<Task> task = TaskFromProto(t, c.num_devices);
    if (!task.ok()) return task.status();
    tasks.push_back(*std::move(task));
  }
  std::sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) { return a.id < b.id; });
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].id != static_cast<int>(i)) {
      return Malformed(absl::StrCat("task ids must be 0..", tasks.size() - 1,
                                    " without gaps; found ", tasks[i].id, " at ", i));
    }
  }
  g.tasks = std::move(tasks);
  return g;
}

proto::ProfileFile ProfileOfPlan(const proto::Plan& plan) {
  proto::ProfileFile file;
  file.set_schema_version(1);
  *file.mutable_model() = plan.model();
  *file.mutable_profile() = plan.profile();
  return file;
}

}  // namespace harmony::plan
