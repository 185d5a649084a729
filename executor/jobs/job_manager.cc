#include "executor/jobs/job_manager.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <atomic>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/files.h"
#include "common/host_memory.h"
#include "common/plan_file.h"
#include "common/status.h"
#include "common/tensor_file.h"
#include "common/token_file.h"
#include "common/units.h"
#include "executor/dist/collective.h"
#include "executor/jobs/job_manager_impl.h"
#include "executor/jobs/job_store.h"
#include "executor/runtime/checkpoint.h"
#include "executor/runtime/runtime.h"
#include "plan/plan_reader.h"

namespace harmony::executor {
namespace {

using common::FormatBytes;

absl::Status CheckReadable(const std::string& what, const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat("no ", what, " path given"));
  if (access(path.c_str(), R_OK) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path, " cannot be read"));
  }
  if (std::filesystem::is_directory(path)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is a directory"));
  }
  return absl::OkStatus();
}

// The output can be written: a file made beside it now (and removed), as
// permission bits alone do not tell (root passes access(2) on /proc, where
// no file can be made). Checked at admission, so no training is lost to a
// bad path at the end.
absl::Status CheckWritableOutput(const std::string& path, bool overwrite) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("output ", path, " is a directory; give a file path (e.g. ", path,
                     "/model.pt)"));
  }
  if (!overwrite && std::filesystem::exists(path, ec)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "output ", path, " exists; it is left as it is: name another file, or give --overwrite "
        "to replace it"));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const std::string probe =
      absl::StrCat(dir, "/.", std::filesystem::path(path).filename().string(), ".harmony-probe-",
                   getpid());
  const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    // InvalidArgument whatever errno says: the request is wrong, not a job.
    return absl::InvalidArgumentError(absl::StrCat("output ", path,
                                                   " cannot be written (no file can be made in ",
                                                   dir, ": ", std::strerror(errno), ")"));
  }
  close(fd);
  unlink(probe.c_str());
  return absl::OkStatus();
}

// A world of at least two daemons, each named once as host:port, this
// daemon's rank among them, and a timeout.
absl::Status CheckWorld(const WorldInfo& world) {
  if (world.daemons.empty()) return absl::OkStatus();
  if (world.daemons.size() < 2) {
    return absl::InvalidArgumentError("a world needs at least 2 daemons");
  }
  std::set<std::string> seen;
  for (const std::string& d : world.daemons) {
    const size_t colon = d.rfind(':');
    int port = 0;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(d.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("world daemon \"", d, "\" is not host:port"));
    }
    if (!seen.insert(d).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the world lists daemon ", d, " twice: each rank needs a daemon of its own"));
    }
  }
  if (world.rank < 0 || world.rank >= world.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", world.rank, " is not in a world of ", world.size()));
  }
  if (world.world_id.empty()) return absl::InvalidArgumentError("a world needs an id");
  if (!(world.timeout_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the world's timeout must be positive; got ", world.timeout_s, " s"));
  }
  return absl::OkStatus();
}

}  // namespace


JobManager::JobManager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(
    const JobManagerOptions& options) {
  // CUDA devices in a build without CUDA, or none: refused here.
  HARMONY_ASSIGN_OR_RETURN(std::vector<DeviceInfo> infos, DescribeDevices(options.devices));
  if (infos.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no devices: ", options.devices.ToString()));
  }
  if (options.state_dir.empty()) return absl::InvalidArgumentError("no state directory given");
  if (options.max_queued < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the queue must hold at least 1 job (max queued ", options.max_queued, ")"));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->server_devices = options.devices;
  impl->options.devices.count = static_cast<int>(infos.size());
  impl->options.devices.capacity = infos[0].capacity;
  for (const DeviceInfo& i : infos) {
    impl->options.devices.capacity = std::min(impl->options.devices.capacity, i.capacity);
  }
  impl->device_infos = std::move(infos);
  HARMONY_ASSIGN_OR_RETURN(JobStore store, JobStore::Open(options.state_dir));
  impl->store.emplace(std::move(store));
  HARMONY_ASSIGN_OR_RETURN(PathPolicy paths,
                           PathPolicy::Create(options.allowed_paths, options.state_dir));
  impl->paths.emplace(std::move(paths));
  impl->host_total = options.host_memory > 0 ? options.host_memory : common::AvailableHostMemory();
  if (impl->host_total == 0) {
    return absl::FailedPreconditionError(
        "cannot tell how much host memory there is (no MemAvailable in /proc/meminfo); give "
        "--host-memory");
  }

  // Records of an earlier run.
  std::vector<std::string> problems;
  std::vector<JobRecord> records = impl->store->LoadAll(&problems);
  {
    absl::MutexLock lock(&impl->mu);
    impl->device_owner.assign(impl->options.devices.count, "");
    for (const std::string& p : problems) {
      if (options.log) options.log(absl::StrCat("warning: skipping a job record: ", p));
    }
    for (JobRecord& r : records) {
      auto job = std::make_unique<Impl::Job>();
      const std::string id = r.id;
      job->record = std::move(r);
      impl->next_id =
          std::max<int64_t>(impl->next_id, std::atoll(id.c_str() + std::min<size_t>(4, id.size())) + 1);
      if (!job->record.submission_id.empty()) {
        impl->by_submission[job->record.submission_id] = id;
      }
      Impl::Job* j = job.get();
      impl->jobs[id] = std::move(job);
      impl->order.push_back(id);
      if (j->record.state == JobState::kCancelling) {
        impl->ChangeState(*j, JobState::kCancelled, "daemon restarted while cancelling");
      } else if (j->record.world.active() && !IsTerminal(j->record.state)) {
        // Its world went on without this rank (and failed): it does not
        // resume alone.
        impl->ChangeState(*j, JobState::kFailed,
                          absl::StrCat("daemon restarted; a job of a world of ",
                                       j->record.world.size(), " does not resume by itself: "
                                       "submit it again (--resume from rank 0's checkpoint)"));
      } else if (j->record.state == JobState::kRunning) {
        // Killed while training (kill -9, a crash, a reboot): queued again,
        // to resume from its latest checkpoint, or from the start.
        impl->ChangeState(*j, JobState::kQueued,
                          j->record.checkpoint_path.empty()
                              ? std::string("daemon restarted; starts again from the beginning "
                                            "(no checkpoint)")
                              : absl::StrCat("daemon restarted; resumes from iteration ",
                                             j->record.checkpoint_iteration));
      }
      if (j->record.state == JobState::kQueued) {
        auto plan = impl->store->LoadPlan(id);
        if (!plan.ok()) {
          impl->ChangeState(*j, JobState::kFailed,
                            absl::StrCat("daemon restarted and the plan is lost: ",
                                         plan.status().message()));
        } else if (j->record.num_devices > impl->options.devices.count ||
                   j->record.device_memory_bytes > impl->options.devices.capacity) {
          impl->ChangeState(*j, JobState::kFailed,
                            absl::StrCat("daemon restarted with devices ",
                                         options.devices.ToString(), " too few or too small"));
        } else {
          j->plan = std::make_shared<const proto::Plan>(*std::move(plan));
          impl->queue.push_back(id);
          impl->Log(*j, "queued again after a daemon restart");
        }
      }
    }
    impl->Schedule();
  }
  impl->Sync();
  return std::unique_ptr<JobManager>(new JobManager(std::move(impl)));
}

JobManager::~JobManager() {
  std::vector<Impl::Job*> running;
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->stopping = true;
    for (auto& [id, job] : impl_->jobs) {
      if (job->thread.joinable()) {
        if (!IsTerminal(job->record.state)) {
          job->stopped_by_daemon = true;
          job->cancel.store(true);
        }
        running.push_back(job.get());
      }
    }
  }
  for (Impl::Job* job : running) job->thread.join();
  impl_->Sync();
}

absl::StatusOr<SubmitResult> JobManager::Submit(JobSpec spec) {
  impl_->JoinFinished();
  {
    absl::MutexLock lock(&impl_->mu);
    if (!spec.submission_id.empty()) {
      auto it = impl_->by_submission.find(spec.submission_id);
      if (it != impl_->by_submission.end()) return SubmitResult{it->second, true};
    }
  }
  if (spec.plan == nullptr) return absl::InvalidArgumentError("no plan given");
  const proto::Plan& plan = *spec.plan;
  if (spec.iterations < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("iterations must be at least 1; got ", spec.iterations));
  }
  if (spec.checkpoint_interval < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint interval must be 0 (none) or more; got ", spec.checkpoint_interval));
  }
  if (!(spec.checkpoint_minutes >= 0) || spec.keep_checkpoints < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint minutes must be 0 (none) or more and checkpoints kept at least 1; got ",
        spec.checkpoint_minutes, " and ", spec.keep_checkpoints));
  }
  if (!(spec.optimizer.learning_rate > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("learning rate must be positive; got ", spec.optimizer.learning_rate));
  }
  if (plan.schema_version() != common::kPlanSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("the plan has schema version ", plan.schema_version(), "; this daemon runs ",
                     common::kPlanSchemaVersion));
  }
  // The plan's task graph must be well-formed (same check the runtime makes).
  HARMONY_RETURN_IF_ERROR(
      common::Annotate(plan::TaskGraphFromPlan(plan).status(), "malformed plan"));
  const auto& config = plan.config();
  const common::DeviceSpec& devices = impl_->options.devices;
  if (static_cast<int>(config.num_devices()) > devices.count) {
    return absl::FailedPreconditionError(
        absl::StrCat("the plan needs ", config.num_devices(), " devices; this daemon has ",
                     devices.count, " (", impl_->server_devices.ToString(), ")"));
  }
  if (config.device_memory_bytes() > devices.capacity) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the plan was made for devices of ", FormatBytes(config.device_memory_bytes()),
        "; this daemon's have ", FormatBytes(devices.capacity), " (",
        impl_->server_devices.ToString(), ")"));
  }
  const bool plan_bf16 = config.precision() == proto::BF16;
  if (spec.bf16.has_value() && *spec.bf16 != plan_bf16) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the plan trains in ", plan_bf16 ? "bf16" : "fp32", ", not --precision ",
        *spec.bf16 ? "bf16" : "fp32", ": make a plan with harmony-plan --precision ",
        *spec.bf16 ? "bf16" : "fp32", ", or leave --precision out"));
  }
  const uint64_t host_need = plan.estimates().host_memory_bytes();
  if (host_need > impl_->host_total) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the plan needs ", FormatBytes(host_need),
        " of host memory (weights, gradients, optimizer state, stashes); this daemon has ",
        FormatBytes(impl_->host_total)));
  }
  // Uploaded data is kept in the state directory and named from there.
  if (!spec.data_bytes.empty()) {
    HARMONY_ASSIGN_OR_RETURN(spec.data_path, impl_->store->SaveData(spec.data_bytes,
                                                                     spec.data_name));
  }
  if (!spec.eval_data_bytes.empty()) {
    HARMONY_ASSIGN_OR_RETURN(spec.recipe.eval_data, impl_->store->SaveData(
                                                         spec.eval_data_bytes,
                                                         spec.eval_data_name));
  }
  // Every path it names lies where the operator lets jobs reach.
  const PathPolicy& paths = *impl_->paths;
  if (spec.model_bytes.empty()) HARMONY_RETURN_IF_ERROR(paths.Check("--model", spec.model_path));
  HARMONY_RETURN_IF_ERROR(paths.Check("--data", spec.data_path));
  HARMONY_RETURN_IF_ERROR(paths.Check("--eval-data", spec.recipe.eval_data));
  HARMONY_RETURN_IF_ERROR(paths.Check("--out", spec.output_path));
  HARMONY_RETURN_IF_ERROR(paths.Check("--tensorboard", spec.tensorboard_dir));
  // The model: the bytes the plan was made for.
  std::string model_path = spec.model_path;
  std::string sha;
  if (!spec.model_bytes.empty()) {
    sha = common::Sha256Hex(spec.model_bytes);
  } else {
    HARMONY_RETURN_IF_ERROR(CheckReadable("model", model_path));
    HARMONY_ASSIGN_OR_RETURN(sha, common::Sha256OfFile(model_path));
  }
  if (sha != plan.model().sha256()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model ", spec.model_bytes.empty() ? model_path : "(uploaded)",
        " is not the one the plan was made for: its sha256 is ", sha.substr(0, 16),
        "..., the plan's ", plan.model().sha256().substr(0, 16), "... (",
        plan.model().file_name(), ")"));
  }
  HARMONY_RETURN_IF_ERROR(CheckReadable("data", spec.data_path));
  for (const std::string& path : {spec.data_path, spec.recipe.eval_data}) {
    if (path.empty() || !common::IsTokenFile(path)) continue;
    // A token file's flags and size, before it is queued.
    std::optional<common::TokenType> type;
    if (!spec.token_dtype.empty()) {
      HARMONY_ASSIGN_OR_RETURN(type, common::ParseTokenType(spec.token_dtype));
    }
    HARMONY_RETURN_IF_ERROR(common::TokenFile::Open(path, type, spec.seq_len).status());
  }
  if (!spec.recipe.eval_data.empty()) {
    HARMONY_RETURN_IF_ERROR(CheckReadable("evaluation data", spec.recipe.eval_data));
  }
  if (!spec.output_path.empty()) HARMONY_RETURN_IF_ERROR(CheckWritableOutput(spec.output_path, spec.overwrite));
  HARMONY_RETURN_IF_ERROR(CheckWorld(spec.world));
  // A checkpoint to start from: of this model, and short of the iterations.
  if (!spec.resume_from.empty()) {
    HARMONY_ASSIGN_OR_RETURN(const std::string resume, ResolveCheckpoint(spec.resume_from));
    HARMONY_RETURN_IF_ERROR(paths.Check("--resume", resume));
    HARMONY_ASSIGN_OR_RETURN(const Checkpoint c, ReadCheckpoint(resume));
    if (c.model_sha256 != sha) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint ", resume, " is of another model (sha256 ", c.model_sha256.substr(0, 16),
          "...); the plan's is ", sha.substr(0, 16), "..."));
    }
    if (c.iteration >= spec.iterations) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint ", resume, " is at iteration ", c.iteration, " already; --iterations counts "
          "from the start of training: give more than ", c.iteration));
    }
    spec.resume_from = resume;
  }
  if (!spec.model_bytes.empty()) {
    HARMONY_ASSIGN_OR_RETURN(model_path, impl_->store->SaveModel(sha, spec.model_bytes));
  }

  JobRecord record;
  record.name = spec.name;
  record.submission_id = spec.submission_id;
  record.submitted_at = absl::Now();
  record.model_sha256 = sha;
  record.model_path = model_path;
  record.data_path = spec.data_path;
  record.token_dtype = spec.token_dtype;
  record.seq_len = spec.seq_len;
  record.tensorboard_dir = spec.tensorboard_dir;
  record.bf16 = plan_bf16;
  record.overwrite = spec.overwrite;
  record.output_path = spec.output_path;
  record.iterations = spec.iterations;
  record.optimizer = spec.optimizer;
  record.checkpoint_interval = spec.checkpoint_interval;
  record.checkpoint_minutes = spec.checkpoint_minutes;
  record.keep_checkpoints = spec.keep_checkpoints;
  record.resume_from = spec.resume_from;
  record.seed = spec.seed;
  record.flush_denormal = spec.flush_denormal;
  record.recipe = spec.recipe;
  record.world = spec.world;
  record.held = spec.world.active();
  if (record.world.active() && record.world.rank == 0 && record.world.store.empty()) {
    // Rank 0 hosts the world's store on a port of its own host.
    const std::string& me = record.world.daemons[0];
    record.world.store = absl::StrCat(me.substr(0, me.rfind(':')), ":", PickFreePort());
  }
  record.num_devices = static_cast<int>(config.num_devices());
  record.device_memory_bytes = config.device_memory_bytes();
  record.host_memory_bytes = host_need;
  record.mode = config.mode() == proto::VDP ? "vDP" : "vPP";

  std::string id;
  {
    absl::MutexLock lock(&impl_->mu);
    if (!spec.submission_id.empty()) {  // Submitted meanwhile by another call.
      auto it = impl_->by_submission.find(spec.submission_id);
      if (it != impl_->by_submission.end()) return SubmitResult{it->second, true};
    }
    if (static_cast<int>(impl_->queue.size()) >= impl_->options.max_queued) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the queue is full: ", impl_->queue.size(), " jobs are waiting (--max-queued ",
          impl_->options.max_queued, "); try again when one has started"));
    }
    id = absl::StrCat("job-", impl_->next_id++);
    record.id = id;
    if (record.tensorboard_dir.empty()) record.tensorboard_dir = impl_->store->TensorBoardDir(id);
    auto job = std::make_unique<Impl::Job>();
    job->record = std::move(record);
    job->plan = spec.plan;
    Impl::Job* j = job.get();
    impl_->jobs[id] = std::move(job);
    impl_->order.push_back(id);
    if (!spec.submission_id.empty()) impl_->by_submission[spec.submission_id] = id;
    // The plan reaches the disk before the record says QUEUED (below, in
    // Sync), so a restart always finds the plan of a queued job.
    impl_->ChangeState(*j, JobState::kQueued,
                       absl::StrCat(j->record.name.empty() ? "" : j->record.name + ": ",
                                    j->record.mode, " on ", j->record.num_devices, " devices, ",
                                    j->record.iterations, " iterations"));
  }
  if (absl::Status s = impl_->store->SavePlan(id, plan); !s.ok()) {
    absl::MutexLock lock(&impl_->mu);
    Impl::Job* j = impl_->Find(id);
    impl_->queue.erase(std::remove(impl_->queue.begin(), impl_->queue.end(), id),
                       impl_->queue.end());
    impl_->ChangeState(*j, JobState::kFailed, absl::StrCat("cannot keep its plan: ", s.message()));
  } else {
    absl::MutexLock lock(&impl_->mu);
    // Unless cancelled meanwhile, or held for its world's start.
    const JobRecord& r = impl_->Find(id)->record;
    if (r.state == JobState::kQueued && !r.held) impl_->queue.push_back(id);
    impl_->Schedule();
  }
  impl_->Sync();
  SubmitResult result{id, false};
  {
    absl::MutexLock lock(&impl_->mu);
    result.store = impl_->Find(id)->record.world.store;
  }
  return result;
}

absl::StatusOr<JobRecord> JobManager::StartWorld(const std::string& id, const WorldInfo& world) {
  JobRecord result;
  {
    absl::MutexLock lock(&impl_->mu);
    Impl::Job* job = impl_->Find(id);
    if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", id));
    JobRecord& r = job->record;
    if (!r.world.active() || world.world_id != r.world.world_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          id, " is not a job of world ", world.world_id.empty() ? "(none)" : world.world_id));
    }
    if (r.state != JobState::kQueued) {
      return absl::FailedPreconditionError(absl::StrCat(
          id, " is ", JobStateName(r.state), ", not waiting to start (", r.reason, ")"));
    }
    if (r.held) {
      if (world.daemons != r.world.daemons || world.store.empty() ||
          world.job_ids.size() != world.daemons.size() ||
          world.job_ids[r.world.rank] != id) {
        return absl::InvalidArgumentError(absl::StrCat(
            "starting ", id, ": the world must list the same daemons, a store and every "
            "rank's job id, with ", id, " as rank ", r.world.rank, "'s"));
      }
      r.world.store = world.store;
      r.world.job_ids = world.job_ids;
      r.held = false;
      impl_->queue.push_back(id);
      impl_->Log(*job, absl::StrCat("world ", r.world.world_id, " starts: rank ", r.world.rank,
                                    " of ", r.world.size(), ", store ", r.world.store));
      impl_->MarkDirty(*job);
      impl_->Schedule();
    }
    result = r;
  }
  impl_->Sync();
  return result;
}

absl::StatusOr<JobRecord> JobManager::Get(const std::string& id) const {
  absl::MutexLock lock(&impl_->mu);
  Impl::Job* job = impl_->Find(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", id));
  return job->record;
}

std::vector<JobRecord> JobManager::List(const std::vector<JobState>& states) const {
  absl::MutexLock lock(&impl_->mu);
  std::vector<JobRecord> out;
  for (const std::string& id : impl_->order) {
    const JobRecord& r = impl_->Find(id)->record;
    if (states.empty() || std::find(states.begin(), states.end(), r.state) != states.end()) {
      out.push_back(r);
    }
  }
  return out;
}

absl::StatusOr<JobRecord> JobManager::Cancel(const std::string& id) {
  JobRecord result;
  {
    absl::MutexLock lock(&impl_->mu);
    Impl::Job* job = impl_->Find(id);
    if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", id));
    switch (job->record.state) {
      case JobState::kQueued:
        impl_->queue.erase(std::remove(impl_->queue.begin(), impl_->queue.end(), id),
                           impl_->queue.end());
        impl_->ChangeState(*job, JobState::kCancelled, "cancelled while queued");
        impl_->Schedule();
        break;
      case JobState::kRunning:
        job->cancel.store(true);
        impl_->ChangeState(*job, JobState::kCancelling, "cancel requested; stopping at the next "
                                                        "task boundary");
        break;
      default:
        break;
    }
    result = job->record;
  }
  impl_->Sync();
  return result;
}

absl::StatusOr<std::vector<std::string>> JobManager::Logs(const std::string& id) const {
  {
    absl::MutexLock lock(&impl_->mu);
    if (impl_->Find(id) == nullptr) return absl::NotFoundError(absl::StrCat("no job ", id));
  }
  impl_->Sync();
  return impl_->store->ReadLog(id);
}

absl::StatusOr<std::string> JobManager::ModelFile(const std::string& id, bool checkpoint) const {
  std::string path, kept, state;
  {
    absl::MutexLock lock(&impl_->mu);
    const Impl::Job* job = impl_->Find(id);
    if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", id));
    path = checkpoint ? job->record.checkpoint_path : impl_->store->TrainedModelPath(id);
    kept = job->record.kept_model_path;
    state = std::string(JobStateName(job->record.state));
  }
  std::error_code error;
  if (!checkpoint && !std::filesystem::exists(path, error) && !kept.empty()) path = kept;
  if (path.empty() || !std::filesystem::exists(path, error)) {
    return absl::FailedPreconditionError(absl::StrCat(
        id, " is ", state, " and has no ", checkpoint ? "checkpoint" : "trained model",
        checkpoint ? " (submit with --checkpoint-interval or --checkpoint-minutes)"
                   : " yet (it has one when it succeeds; --checkpoint fetches its latest "
                     "checkpoint)"));
  }
  return path;
}

absl::Status JobManager::Watch(const std::string& id, const void* owner, Listener listener) {
  absl::MutexLock lock(&impl_->mu);
  Impl::Job* job = impl_->Find(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", id));
  JobEvent state;
  state.kind = JobEvent::Kind::kStateChange;
  state.job_id = id;
  state.state_change = job->record.history.empty()
                           ? StateChange{job->record.state, job->record.submitted_at, ""}
                           : job->record.history.back();
  if (job->record.progress) {
    JobEvent progress;
    progress.kind = JobEvent::Kind::kProgress;
    progress.job_id = id;
    progress.progress = *job->record.progress;
    if (!listener(progress)) return absl::OkStatus();
  }
  if (!listener(state) || IsTerminal(job->record.state)) return absl::OkStatus();
  impl_->watchers.push_back({id, owner, std::move(listener)});
  return absl::OkStatus();
}

void JobManager::Unwatch(const void* owner) {
  absl::MutexLock lock(&impl_->mu);
  auto& w = impl_->watchers;
  w.erase(std::remove_if(w.begin(), w.end(),
                         [&](const Impl::Watcher& x) { return x.owner == owner; }),
          w.end());
}

DevicesStatus JobManager::Devices() const {
  absl::MutexLock lock(&impl_->mu);
  DevicesStatus out;
  out.kind = impl_->server_devices.kind == common::DeviceSpec::Kind::kCuda ? "cuda" : "cpu";
  out.host_memory_bytes = impl_->host_total;
  out.host_reserved_bytes = impl_->host_reserved;
  for (int d = 0; d < static_cast<int>(impl_->device_owner.size()); ++d) {
    DeviceStatus s;
    s.index = d;
    s.name = impl_->device_infos[d].name;
    s.memory_bytes = impl_->device_infos[d].capacity;
    s.job_id = impl_->device_owner[d];
    if (!s.job_id.empty()) {
      Impl::Job* job = impl_->Find(s.job_id);
      if (job->runtime != nullptr) {
        // The job's k-th device is this server's device job->record.devices[k].
        const std::vector<uint64_t> used = job->runtime->device_bytes_in_use();
        const auto& mine = job->record.devices;
        const auto k = std::find(mine.begin(), mine.end(), d) - mine.begin();
        if (k < static_cast<long>(used.size())) s.used_bytes = used[k];
      }
    }
    out.devices.push_back(s);
  }
  return out;
}

absl::StatusOr<JobRecord> JobManager::WaitForEnd(const std::string& id) const {
  absl::MutexLock lock(&impl_->mu);
  Impl::Job* job = impl_->Find(id);
  if (job == nullptr) return absl::NotFoundError(absl::StrCat("no job ", id));
  while (!IsTerminal(job->record.state)) impl_->ended.Wait(&impl_->mu);
  return job->record;
}

}  // namespace harmony::executor
