#include "executor/service/service.h"

#include <filesystem>
#include <deque>
#include <functional>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/files.h"
#include "common/plan_file.h"
#include "common/units.h"
#include "common/status.h"
#include "executor/jobs/job.h"
#include "executor/runtime/recipe.h"

namespace harmony::executor {
namespace {

void SetTime(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t nanos = absl::ToUnixNanos(t);
  out->set_seconds(nanos / 1000000000);
  out->set_nanos(static_cast<int32_t>(nanos % 1000000000));
}

proto::JobState ToProto(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return proto::QUEUED;
    case JobState::kRunning:
      return proto::RUNNING;
    case JobState::kCancelling:
      return proto::CANCELLING;
    case JobState::kSucceeded:
      return proto::SUCCEEDED;
    case JobState::kFailed:
      return proto::FAILED;
    case JobState::kCancelled:
      return proto::CANCELLED;
  }
  return proto::JOB_STATE_UNSPECIFIED;
}

void ToProto(const optim::OptimizerOptions& o, proto::OptimizerSettings* out) {
  out->set_kind(o.kind == optim::OptimizerKind::kAdam    ? proto::ADAM
                : o.kind == optim::OptimizerKind::kAdamW ? proto::ADAMW
                                                  : proto::SGD);
  out->set_learning_rate(o.learning_rate);
  out->set_momentum(o.momentum);
  out->set_weight_decay(o.weight_decay);
  out->set_beta1(o.beta1);
  out->set_beta2(o.beta2);
  out->set_epsilon(o.epsilon);
}

void ToProto(const WorldInfo& w, proto::WorldSpec* out) {
  for (const std::string& d : w.daemons) out->add_daemons(d);
  out->set_rank(static_cast<uint32_t>(w.rank));
  out->set_world_id(w.world_id);
  out->set_store(w.store);
  for (const std::string& id : w.job_ids) out->add_job_ids(id);
  out->set_shard_optimizer_state(w.shard_optimizer_state);
  out->set_timeout_s(w.timeout_s);
}

WorldInfo FromProto(const proto::WorldSpec& w) {
  WorldInfo out;
  out.daemons.assign(w.daemons().begin(), w.daemons().end());
  out.rank = static_cast<int>(w.rank());
  out.world_id = w.world_id();
  out.store = w.store();
  out.job_ids.assign(w.job_ids().begin(), w.job_ids().end());
  out.shard_optimizer_state = w.shard_optimizer_state();
  if (w.timeout_s() > 0) out.timeout_s = w.timeout_s();
  return out;
}

void ToProto(const StateChange& c, proto::StateChange* out) {
  out->set_state(ToProto(c.state));
  SetTime(c.time, out->mutable_time());
  out->set_reason(c.reason);
}

void ToProto(const JobProgress& p, proto::Progress* out) {
  out->set_iteration(static_cast<uint32_t>(p.iteration));
  out->set_iterations(static_cast<uint32_t>(p.iterations));
  out->set_loss(p.loss);
  out->set_samples_per_s(p.samples_per_s);
  out->set_swap_in_bytes(p.swap_in_bytes);
  out->set_swap_out_bytes(p.swap_out_bytes);
  out->set_eta_s(p.eta_s);
  out->set_iteration_seconds(p.iteration_s);
  SetTime(p.time, out->mutable_time());
  for (uint64_t b : p.device_peak_bytes) out->add_device_peak_bytes(b);
  out->set_emulated_link(p.emulated_link);
  out->set_eval_loss(p.eval_loss);
  out->set_eval_iteration(static_cast<uint32_t>(p.eval_iteration));
}

void ToProto(const JobRecord& r, proto::Job* out) {
  out->set_id(r.id);
  out->set_name(r.name);
  out->set_submission_id(r.submission_id);
  out->set_state(ToProto(r.state));
  out->set_reason(r.reason);
  for (const StateChange& c : r.history) ToProto(c, out->add_history());
  out->set_model_sha256(r.model_sha256);
  out->set_data_path(r.data_path);
  out->set_token_dtype(r.token_dtype);
  out->set_tensorboard_dir(r.tensorboard_dir);
  out->set_bf16(r.bf16);
  out->set_seq_len(r.seq_len);
  out->set_output_path(r.output_path);
  out->set_overwrite(r.overwrite);
  out->set_iterations(static_cast<uint32_t>(r.iterations));
  ToProto(r.optimizer, out->mutable_optimizer());
  {
    proto::OptimizerSettings* o = out->mutable_optimizer();
    const TrainingRecipe& c = r.recipe;
    o->set_lr_schedule(optim::ScheduleKindName(c.lr_schedule.kind));
    o->set_warmup_iterations(c.lr_schedule.warmup_iterations);
    o->set_decay_iterations(c.lr_schedule.decay_iterations);
    o->set_min_lr(c.lr_schedule.min_lr);
    o->set_clip_grad_norm(c.clip_grad_norm);
    o->set_clip_mode(ClipModeName(c.clip_mode));
    o->set_no_decay(c.no_decay);
    o->set_no_decay_embeddings(c.no_decay_embeddings);
    o->set_eval_data_path(c.eval_data);
    o->set_eval_every(c.eval_every);
    o->set_eval_iterations(c.eval_iterations);
  }
  for (int d : r.devices) out->add_devices(d);
  if (r.progress) ToProto(*r.progress, out->mutable_progress());
  SetTime(r.submitted_at, out->mutable_submitted_at());
  out->set_num_devices(r.num_devices);
  out->set_device_memory_bytes(r.device_memory_bytes);
  out->set_host_memory_bytes(r.host_memory_bytes);
  out->set_mode(r.mode);
  out->set_model_path(r.model_path);
  out->set_checkpoint_interval(static_cast<uint32_t>(r.checkpoint_interval));
  out->set_checkpoint_minutes(r.checkpoint_minutes);
  out->set_keep_checkpoints(static_cast<uint32_t>(r.keep_checkpoints));
  out->set_checkpoint_path(r.checkpoint_path);
  out->set_checkpoint_iteration(static_cast<uint64_t>(r.checkpoint_iteration));
  out->set_resume_from(r.resume_from);
  out->set_resumed_from_iteration(r.resumed_from_iteration);
  out->set_kept_model_path(r.kept_model_path);
  out->set_seed(r.seed);
  if (r.flush_denormal) out->set_flush_denormal(*r.flush_denormal);
  if (r.world.active()) ToProto(r.world, out->mutable_world());
  out->set_held(r.held);
}

void ToProto(const JobEvent& e, proto::JobEvent* out) {
  out->set_job_id(e.job_id);
  switch (e.kind) {
    case JobEvent::Kind::kProgress:
      ToProto(e.progress, out->mutable_progress());
      break;
    case JobEvent::Kind::kStateChange:
      ToProto(e.state_change, out->mutable_state_change());
      break;
    case JobEvent::Kind::kLog:
      out->set_log(e.log);
      break;
  }
}

// The request as a job spec; InvalidArgument for what is malformed.
absl::StatusOr<JobSpec> FromProto(const proto::SubmitJobRequest& r, uint64_t max_model_bytes) {
  JobSpec spec;
  if (r.plan().empty()) return absl::InvalidArgumentError("no plan given");
  absl::StatusOr<proto::Plan> plan = common::ParsePlan(r.plan(), "submitted plan");
  if (!plan.ok()) return plan.status();
  spec.plan = std::make_shared<const proto::Plan>(*std::move(plan));
  switch (r.model_case()) {
    case proto::SubmitJobRequest::kModelPath:
      spec.model_path = r.model_path();
      break;
    case proto::SubmitJobRequest::kModelBytes:
      if (r.model_bytes().size() > max_model_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "the uploaded model is ", common::FormatBytes(r.model_bytes().size()),
            "; this daemon takes at most ", common::FormatBytes(max_model_bytes),
            " (give a path on the server instead)"));
      }
      spec.model_bytes = r.model_bytes();
      break;
    default:
      return absl::InvalidArgumentError("no model given (a path on the server or its bytes)");
  }
  spec.data_path = r.data_path();
  if (r.data_bytes().size() + r.eval_data_bytes().size() > max_model_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the uploaded data is ", common::FormatBytes(r.data_bytes().size() +
                                                     r.eval_data_bytes().size()),
        "; this daemon takes at most ", common::FormatBytes(max_model_bytes),
        " (send it by path: harmony-ctl submit --by-path)"));
  }
  spec.data_bytes = r.data_bytes();
  spec.data_name = r.data_name();
  spec.eval_data_bytes = r.eval_data_bytes();
  spec.eval_data_name = r.eval_data_name();
  spec.token_dtype = r.token_dtype();
  spec.tensorboard_dir = r.tensorboard_dir();
  if (r.has_bf16()) spec.bf16 = r.bf16();
  spec.seq_len = r.seq_len();
  spec.iterations = r.iterations();
  const proto::OptimizerSettings& o = r.optimizer();
  switch (o.kind()) {
    case proto::OPTIMIZER_UNSPECIFIED:
    case proto::SGD:
      spec.optimizer.kind = optim::OptimizerKind::kSgd;
      break;
    case proto::ADAM:
      spec.optimizer.kind = optim::OptimizerKind::kAdam;
      break;
    case proto::ADAMW:
      spec.optimizer.kind = optim::OptimizerKind::kAdamW;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown optimizer kind ", o.kind()));
  }
  // proto3 cannot tell 0 from unset: 0 keeps the default for the Adam
  // constants; the learning rate must be given.
  spec.optimizer.learning_rate = o.learning_rate();
  spec.optimizer.momentum = o.momentum();
  spec.optimizer.weight_decay = o.weight_decay();
  if (o.beta1() != 0) spec.optimizer.beta1 = o.beta1();
  if (o.beta2() != 0) spec.optimizer.beta2 = o.beta2();
  if (o.epsilon() != 0) spec.optimizer.epsilon = o.epsilon();
  {
    // The recipe, every value checked at submission (before training).
    TrainingRecipe& recipe = spec.recipe;
    HARMONY_ASSIGN_OR_RETURN(
        recipe.lr_schedule.kind,
        optim::ParseScheduleKind(o.lr_schedule().empty() ? "constant" : o.lr_schedule()));
    recipe.lr_schedule.warmup_iterations = o.warmup_iterations();
    recipe.lr_schedule.decay_iterations = o.decay_iterations();
    recipe.lr_schedule.min_lr = o.min_lr();
    recipe.clip_grad_norm = o.clip_grad_norm();
    HARMONY_ASSIGN_OR_RETURN(recipe.clip_mode,
                             ParseClipMode(o.clip_mode().empty() ? "auto" : o.clip_mode()));
    recipe.no_decay = o.no_decay();
    recipe.no_decay_embeddings = o.no_decay_embeddings();
    // Uploaded evaluation data: named here by its file name, by its copy in
    // the state directory once the manager has kept it.
    recipe.eval_data = r.eval_data_bytes().empty() ? o.eval_data_path() : r.eval_data_name();
    recipe.eval_every = o.eval_every();
    recipe.eval_iterations = o.eval_iterations();
    HARMONY_RETURN_IF_ERROR(ResolveRecipe(spec.optimizer, r.iterations(), recipe));
  }
  if (o.momentum() < 0 || o.weight_decay() < 0 || o.beta1() < 0 || o.beta1() >= 1 ||
      o.beta2() < 0 || o.beta2() >= 1 || o.epsilon() < 0) {
    return absl::InvalidArgumentError(
        "optimizer settings out of range: momentum and weight decay must be >= 0, betas in "
        "[0, 1), epsilon >= 0");
  }
  spec.output_path = r.output_path();
  spec.overwrite = r.overwrite();
  spec.checkpoint_interval = r.checkpoint_interval();
  spec.checkpoint_minutes = r.checkpoint_minutes();
  if (r.keep_checkpoints() > 0) spec.keep_checkpoints = static_cast<int>(r.keep_checkpoints());
  spec.submission_id = r.submission_id();
  spec.seed = r.seed();
  if (r.has_flush_denormal()) spec.flush_denormal = r.flush_denormal();
  spec.name = r.name();
  if (r.has_world()) spec.world = FromProto(r.world());
  return spec;
}

// Streams one job's events. Lifetime: created by WatchJob, deleted in
// OnDone, after Unwatch guarantees the manager no longer calls it.
class WatchReactor final : public grpc::ServerWriteReactor<proto::JobEvent> {
 public:
  WatchReactor(JobManager* manager, const std::string& job_id) : manager_(manager) {
    absl::Status s = manager_->Watch(job_id, this, [this](const JobEvent& e) {
      Push(e);
      return true;
    });
    if (!s.ok()) {
      absl::MutexLock lock(&mu_);
      finished_ = true;
      Finish(ToGrpcStatus(s));
    }
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    queue_.pop_front();
    if (!ok) {  // The client went away.
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the watcher went away"));
      return;
    }
    WriteNextLocked();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    if (!writing_) FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
  }

  void OnDone() override {
    manager_->Unwatch(this);
    delete this;
  }

 private:
  // Called by the manager with its lock held: queue and maybe start a write
  // (neither blocks; gRPC runs OnWriteDone and OnDone on its own threads,
  // never inside StartWrite or Finish).
  void Push(const JobEvent& e) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    queue_.emplace_back();
    ToProto(e, &queue_.back());
    if (e.kind == JobEvent::Kind::kStateChange && IsTerminal(e.state_change.state)) {
      ended_ = true;
    }
    WriteNextLocked();
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (queue_.empty()) {
      if (ended_) FinishLocked(grpc::Status::OK);
      return;
    }
    writing_ = true;
    StartWrite(&queue_.front());
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  JobManager* const manager_;
  absl::Mutex mu_;
  // Front is being written while writing_; std::deque keeps it in place.
  std::deque<proto::JobEvent> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbers.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

ExecutorService::ExecutorService(JobManager* manager, ServiceOptions options)
    : manager_(manager), options_(std::move(options)) {}

absl::Status ExecutorService::Authenticate(const grpc::CallbackServerContext* context) const {
  if (options_.auth_token.empty()) return absl::OkStatus();
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        "this daemon needs its token: harmony-ctl reads it with --state-dir (the daemon's state "
        "directory) or --token-file");
  }
  const std::string given(it->second.data(), it->second.size());
  const std::string want = "Bearer " + options_.auth_token;
  // Compared in time independent of where they differ.
  unsigned char diff = given.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < given.size() && i < want.size(); ++i) diff |= given[i] ^ want[i];
  if (diff != 0) {
    return absl::UnauthenticatedError(
        "wrong token: not this daemon's (daemons of one world are each given the same "
        "--auth-token-file)");
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ExecutorService::Answer(grpc::CallbackServerContext* context,
                                                  const std::function<absl::Status()>& work) {
  auto* reactor = context->DefaultReactor();
  absl::Status status = Authenticate(context);
  if (status.ok()) status = work();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* ExecutorService::SubmitJob(grpc::CallbackServerContext* context,
                                                     const proto::SubmitJobRequest* request,
                                                     proto::SubmitJobResponse* response) {
  return Answer(context, [&]() -> absl::Status {
    absl::StatusOr<JobSpec> spec = FromProto(*request, options_.max_model_bytes);
    if (!spec.ok()) return spec.status();
    if (!request->resume().empty()) {
      // A job id: its latest checkpoint; otherwise a path on the server.
      absl::StatusOr<JobRecord> from = manager_->Get(request->resume());
      if (from.ok() && from->checkpoint_path.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            request->resume(), " has no checkpoint to resume from (submit with "
            "--checkpoint-interval N to have one)"));
      }
      spec->resume_from = from.ok() ? from->checkpoint_path : request->resume();
    }
    absl::StatusOr<SubmitResult> result = manager_->Submit(*std::move(spec));
    if (!result.ok()) return result.status();
    response->set_job_id(result->job_id);
    response->set_already_submitted(result->already_submitted);
    response->set_store(result->store);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ExecutorService::GetJob(grpc::CallbackServerContext* context,
                                                  const proto::GetJobRequest* request,
                                                  proto::Job* response) {
  return Answer(context, [&]() -> absl::Status {
    absl::StatusOr<JobRecord> job = manager_->Get(request->job_id());
    if (!job.ok()) return job.status();
    ToProto(*job, response);
    if (job->world.active() && !request->local_only()) AddRanks(*job, response);
    return absl::OkStatus();
  });
}

void ExecutorService::AddRanks(const JobRecord& job, proto::Job* out) const {
  const WorldInfo& w = job.world;
  for (int r = 0; r < w.size(); ++r) {
    proto::RankStatus* rank = out->add_ranks();
    rank->set_rank(static_cast<uint32_t>(r));
    rank->set_daemon(w.daemons[r]);
    if (r < static_cast<int>(w.job_ids.size())) rank->set_job_id(w.job_ids[r]);
    if (r == w.rank) {
      rank->set_job_id(job.id);
      rank->set_state(ToProto(job.state));
      rank->set_iteration(job.progress ? static_cast<uint32_t>(job.progress->iteration) : 0);
      rank->set_reason(job.reason);
      continue;
    }
    if (rank->job_id().empty()) {
      rank->set_unreachable("not started yet: its job id is not known here");
      continue;
    }
    ClientOptions o = options_.peer;
    o.address = w.daemons[r];
    o.timeout = absl::Seconds(3);
    o.connect_timeout = absl::Seconds(2);
    // Local only: a peer does not ask its own peers in turn.
    absl::StatusOr<proto::Job> peer = ExecutorClient::Create(o)->GetJob(rank->job_id(), true);
    if (!peer.ok()) {
      rank->set_unreachable(std::string(peer.status().message()));
      continue;
    }
    rank->set_state(peer->state());
    rank->set_iteration(peer->progress().iteration());
    rank->set_reason(peer->reason());
  }
}

std::vector<std::string> ExecutorService::CancelPeers(const JobRecord& job) const {
  std::vector<std::string> missed;
  const WorldInfo& w = job.world;
  for (int r = 0; r < w.size(); ++r) {
    if (r == w.rank || r >= static_cast<int>(w.job_ids.size())) continue;
    ClientOptions o = options_.peer;
    o.address = w.daemons[r];
    o.timeout = absl::Seconds(5);
    o.connect_timeout = absl::Seconds(2);
    absl::StatusOr<proto::Job> peer = ExecutorClient::Create(o)->Cancel(w.job_ids[r], true);
    if (!peer.ok()) missed.push_back(absl::StrCat("rank ", r, " (", peer.status().message(), ")"));
  }
  return missed;
}

grpc::ServerUnaryReactor* ExecutorService::ListJobs(grpc::CallbackServerContext* context,
                                                    const proto::ListJobsRequest* request,
                                                    proto::ListJobsResponse* response) {
  return Answer(context, [&]() -> absl::Status {
    std::vector<JobState> states;
    for (int s : request->states()) {
      if (s < proto::QUEUED || s > proto::CANCELLED) {
        return absl::InvalidArgumentError(absl::StrCat("unknown job state ", s));
      }
      states.push_back(static_cast<JobState>(s - proto::QUEUED));
    }
    for (const JobRecord& r : manager_->List(states)) ToProto(r, response->add_jobs());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ExecutorService::CancelJob(grpc::CallbackServerContext* context,
                                                     const proto::CancelJobRequest* request,
                                                     proto::Job* response) {
  return Answer(context, [&]() -> absl::Status {
    absl::StatusOr<JobRecord> job = manager_->Cancel(request->job_id());
    if (!job.ok()) return job.status();
    ToProto(*job, response);
    // Everywhere: the other ranks' daemons too (the running ranks also agree
    // on a cancel between iterations, so one reached is enough to stop all).
    if (job->world.active() && !request->from_peer()) {
      std::vector<std::string> missed = CancelPeers(*job);
      if (!missed.empty()) {
        response->set_reason(absl::StrCat(response->reason(), "; not reached: ",
                                          absl::StrJoin(missed, ", ")));
      }
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ExecutorService::StartWorldJob(
    grpc::CallbackServerContext* context, const proto::StartWorldJobRequest* request,
    proto::Job* response) {
  return Answer(context, [&]() -> absl::Status {
    absl::StatusOr<JobRecord> job =
        manager_->StartWorld(request->job_id(), FromProto(request->world()));
    if (job.ok()) ToProto(*job, response);
    return job.status();
  });
}

grpc::ServerWriteReactor<proto::JobEvent>* ExecutorService::WatchJob(
    grpc::CallbackServerContext* context, const proto::WatchJobRequest* request) {
  if (absl::Status s = Authenticate(context); !s.ok()) {
    class Refused : public grpc::ServerWriteReactor<proto::JobEvent> {
     public:
      explicit Refused(const grpc::Status& s) { Finish(s); }
      void OnDone() override { delete this; }
    };
    return new Refused(ToGrpcStatus(s));
  }
  return new WatchReactor(manager_, request->job_id());
}

grpc::ServerUnaryReactor* ExecutorService::GetDevices(grpc::CallbackServerContext* context,
                                                      const proto::GetDevicesRequest*,
                                                      proto::GetDevicesResponse* response) {
  return Answer(context, [&]() -> absl::Status {
    DevicesStatus devices = manager_->Devices();
    for (const DeviceStatus& d : devices.devices) {
      proto::Device* out = response->add_devices();
      out->set_index(d.index);
      out->set_kind(devices.kind);
      out->set_name(d.name);
      out->set_memory_bytes(d.memory_bytes);
      out->set_used_bytes(d.used_bytes);
      out->set_job_id(d.job_id);
    }
    response->set_host_memory_bytes(devices.host_memory_bytes);
    response->set_host_reserved_bytes(devices.host_reserved_bytes);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ExecutorService::GetJobLogs(grpc::CallbackServerContext* context,
                                                      const proto::GetJobLogsRequest* request,
                                                      proto::GetJobLogsResponse* response) {
  return Answer(context, [&]() -> absl::Status {
    absl::StatusOr<std::vector<std::string>> lines = manager_->Logs(request->job_id());
    if (!lines.ok()) return lines.status();
    for (std::string& line : *lines) response->add_lines(std::move(line));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ExecutorService::FetchModel(grpc::CallbackServerContext* context,
                                                      const proto::FetchModelRequest* request,
                                                      proto::FetchModelResponse* response) {
  return Answer(context, [&]() -> absl::Status {
    absl::StatusOr<std::string> path =
        manager_->ModelFile(request->job_id(), request->checkpoint());
    if (!path.ok()) return path.status();
    std::error_code error;
    const uint64_t size = std::filesystem::file_size(*path, error);
    if (!error && size > options_.max_model_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          *path, " is ", common::FormatBytes(size), ", more than one message of this daemon (",
          common::FormatBytes(options_.max_model_bytes),
          ", harmony-exec --max-message-size); copy it from the server"));
    }
    absl::StatusOr<std::string> bytes = common::ReadFileToString(*path);
    if (!bytes.ok()) return bytes.status();
    response->set_data(*std::move(bytes));
    response->set_file_name(*path);
    return absl::OkStatus();
  });
}

}  // namespace harmony::executor
