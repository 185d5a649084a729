// JobManager::Impl::Run: one job's training (see job_manager_impl.h).

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/device_spec.h"
#include "common/files.h"
#include "common/status.h"
#include "common/tensor_file.h"
#include "common/units.h"
#include "executor/dist/collective.h"
#include "executor/dist/world_setup.h"
#include "executor/jobs/job_manager_impl.h"
#include "executor/runtime/checkpoint.h"
#include "executor/runtime/metrics.h"
#include "executor/runtime/runtime.h"
#include "executor/runtime/tensorboard.h"

namespace harmony::executor {

using common::FormatBytes;

absl::StatusOr<std::unique_ptr<Collective>> JobManager::Impl::JoinWorld(Job& job,
                                                                       const JobRecord& spec) {
  const WorldInfo& world = spec.world;
  CollectiveOptions co;
  HARMONY_RETURN_IF_ERROR(ParseStoreAddress(world.store, co));
  co.rank = world.rank;
  co.world_size = world.size();
  co.timeout = absl::Seconds(world.timeout_s);
  co.who = absl::StrCat("daemon ", world.daemons[world.rank], " ", spec.id);
  {
    absl::MutexLock lock(&mu);
    Log(job, absl::StrCat("joining world ", world.world_id, " as rank ", world.rank, " of ",
                          world.size(), " (store ", world.store, ", waiting at most ",
                          world.timeout_s, " s for the others)"));
  }
  HARMONY_ASSIGN_OR_RETURN(std::unique_ptr<Collective> c, Collective::Join(co));
  const optim::OptimizerOptions& o = spec.optimizer;
  HARMONY_RETURN_IF_ERROR(CheckSameEverywhere(
      *c, {{"world", world.world_id},
           {"model sha256", spec.model_sha256},
           {"minibatch", absl::StrCat(job.plan->config().minibatch())},
           {"optimizer", absl::StrCat(static_cast<int>(o.kind), " lr ", o.learning_rate,
                                      " momentum ", o.momentum, " weight decay ", o.weight_decay,
                                      " betas ", o.beta1, " ", o.beta2, " eps ", o.epsilon)},
           {"iterations", absl::StrCat(spec.iterations)},
           {"seed", absl::StrCat(spec.seed)},
           {"checkpoints", absl::StrCat(spec.checkpoint_interval, " ", spec.checkpoint_minutes)},
           {"shard-optimizer-state", world.shard_optimizer_state ? "yes" : "no"}}));
  return c;
}

void JobManager::Impl::Run(Job* job) {
  const JobRecord spec = [&] {
    absl::MutexLock lock(&mu);
    return job->record;
  }();
  const absl::Time start = absl::Now();
  absl::Status status;
  std::string done_reason;
  {
    RuntimeOptions ro;
    if (server_devices.kind == common::DeviceSpec::Kind::kCpu) {
      ro.devices = common::DeviceSpec{common::DeviceSpec::Kind::kCpu, spec.num_devices,
                                      options.devices.capacity};
    } else {
      // The partitions (or GPUs) the job was given, as the server names them.
      ro.devices = server_devices;
      ro.device_indices = spec.devices;
    }
    ro.optimizer = spec.optimizer;
    ro.seed = spec.seed;
    ro.flush_denormal = spec.flush_denormal;
    ro.recipe = spec.recipe;
    ro.bf16 = spec.bf16;
    ro.shuffle = spec.seed != 0;
    {
      absl::MutexLock lock(&mu);
      // What the other running jobs have not reserved.
      ro.host_memory_limit = std::max<uint64_t>(
          1, host_total - (host_reserved - spec.host_memory_bytes));
    }
    // With checkpoints, a cancel (or the daemon stopping) lets the iteration
    // under way finish, so that a checkpoint can hold it.
    const bool checkpoints = spec.checkpoint_interval > 0 || spec.checkpoint_minutes > 0;
    ro.cancelled = [job, checkpoints] { return !checkpoints && job->cancel.load(); };
    CheckpointPolicy policy;
    if (checkpoints) {
      policy.dir = store->CheckpointDir(spec.id);
      policy.every_iterations = spec.checkpoint_interval;
      policy.every_minutes = spec.checkpoint_minutes;
      policy.keep = spec.keep_checkpoints;
    }
    Checkpointer checkpointer(policy);
    int64_t start_iteration = 0;
    // A world job: the ranks join (rank 0 hosts the store), check that they
    // run one job, and agree on cancels between iterations (a cancel inside
    // an iteration would leave the others waiting in an exchange).
    std::unique_ptr<Collective> collective;
    if (spec.world.active()) {
      absl::StatusOr<std::unique_ptr<Collective>> joined = JoinWorld(*job, spec);
      if (joined.ok()) {
        collective = *std::move(joined);
        ro.world = MakeWorld(*collective, spec.world.shard_optimizer_state);
      } else {
        status = joined.status();
      }
      ro.cancelled = nullptr;
    }
    std::unique_ptr<Runtime> runtime;
    absl::StatusOr<std::unique_ptr<Runtime>> created =
        status.ok() ? Runtime::Create(*job->plan, spec.model_path, ro) : status;
    if (!status.ok()) {
    } else if (!created.ok()) {
      status = common::Annotate(created.status(), "starting");
    } else {
      runtime = *std::move(created);
      status = LoadData(*runtime, {spec.data_path, spec.token_dtype, spec.seq_len}, false);
      if (status.ok() && !spec.recipe.eval_data.empty()) {
        status = LoadData(*runtime, {spec.recipe.eval_data, spec.token_dtype, spec.seq_len},
                          /*eval=*/true);
        status = common::Annotate(status, "the evaluation data");
      }
    }
    // Resume: from the job's own latest checkpoint (requeued after a daemon
    // restart), else from the one it was submitted with.
    const std::string resume = !spec.checkpoint_path.empty() ? spec.checkpoint_path
                                                             : spec.resume_from;
    if (status.ok() && collective != nullptr) {
      // Rank 0 reads the checkpoint, if any, and sends it to the others.
      std::string bytes;
      if (!resume.empty()) {
        absl::StatusOr<std::string> read = common::ReadFileToString(resume);
        if (read.ok()) bytes = *std::move(read);
      }
      absl::StatusOr<std::string> shared = ShareBytes(*collective, bytes, 0);
      status = shared.status();
      if (status.ok() && !shared->empty()) {
        absl::StatusOr<Checkpoint> c = ParseCheckpoint(*shared, "rank 0's checkpoint");
        status = c.ok() ? runtime->Restore(*c) : c.status();
        status = common::Annotate(status, "resuming from rank 0's checkpoint");
        if (status.ok()) start_iteration = c->iteration;
      }
    } else if (status.ok() && !resume.empty()) {
      absl::StatusOr<Checkpoint> c = ReadCheckpoint(resume);
      status = c.ok() ? runtime->Restore(*c) : c.status();
      status = common::Annotate(status, absl::StrCat("resuming from ", resume));
      if (status.ok()) start_iteration = c->iteration;
    }
    if (status.ok()) {
      absl::MutexLock lock(&mu);
      job->runtime = runtime.get();
      if (!resume.empty()) {
        job->record.resumed_from_iteration = start_iteration;
        Log(*job, absl::StrCat("resumed from iteration ", start_iteration, " (", resume, ")"));
      }
      Log(*job,
          absl::StrCat("host store ", FormatBytes(runtime->host_store_bytes()), ", data ",
                       spec.data_path, ", denormals ",
                       runtime->flush_denormal() ? "flushed to zero" : "computed"),
          /*daemon_too=*/false);
      TrainingRecipe shown = spec.recipe;
      shown.clip_mode = runtime->clip_mode();
      Log(*job, absl::StrCat("recipe: ", DescribeRecipe(spec.optimizer, shown)),
          /*daemon_too=*/false);
      if (!shown.eval_data.empty()) {
        Log(*job, absl::StrCat("validation: ", DescribeEvaluation(shown)), /*daemon_too=*/false);
      }
    }
    // TensorBoard's event files (rank 0's of a world); a new file per start.
    std::unique_ptr<EventWriter> tensorboard;
    if (status.ok() && spec.world.rank == 0 && !spec.tensorboard_dir.empty()) {
      absl::StatusOr<std::unique_ptr<EventWriter>> w = EventWriter::Create(spec.tensorboard_dir);
      if (w.ok()) {
        tensorboard = *std::move(w);
        absl::MutexLock lock(&mu);
        Log(*job, absl::StrCat("TensorBoard: ", tensorboard->path()), /*daemon_too=*/false);
      } else {
        status = w.status();
      }
    }
    // Checkpoints are written in the background (training stalls only while
    // the state is copied); the record names one once it is on disk.
    int64_t writing_iteration = 0;
    auto finish_checkpoint = [&]() -> absl::Status {
      if (!checkpointer.pending()) return absl::OkStatus();
      double write_s = 0;
      absl::Status written = checkpointer.Finish(&write_s);
      if (!written.ok()) return common::Annotate(written, "writing a checkpoint");
      absl::MutexLock lock(&mu);
      job->record.checkpoint_path = checkpointer.last_path();
      job->record.checkpoint_iteration = writing_iteration;
      Log(*job, absl::StrFormat("checkpoint after iteration %d: %s (written in %.3f s)",
                                writing_iteration, checkpointer.last_path(), write_s));
      MarkDirty(*job);
      return absl::OkStatus();
    };
    auto take_checkpoint = [&](int64_t done) -> absl::Status {
      HARMONY_RETURN_IF_ERROR(finish_checkpoint());
      writing_iteration = done;
      HARMONY_ASSIGN_OR_RETURN(Checkpoint c, runtime->MakeCheckpoint());
      // Rank 0 writes a world's (the others took part in gathering it).
      if (spec.world.rank == 0) checkpointer.Write(std::move(c));
      return absl::OkStatus();
    };
    double seconds = 0;
    double eval_loss = 0;
    int64_t eval_iteration = 0;  // The latest evaluation's.
    std::vector<double> compute_per_iteration;  // For the check against the plan.
    std::vector<IterationBalance> balance_per_iteration;  // The same.
    for (int64_t i = start_iteration; status.ok() && i < spec.iterations; ++i) {
      // What decides is what every rank agreed on: a cancel that arrives
      // after the agreement waits for the next iteration.
      bool stop = job->cancel.load();
      if (collective != nullptr) {
        // A cancel on any rank stops every rank before the same iteration.
        absl::StatusOr<bool> any = AnyRank(*collective, stop);
        if (!any.ok()) {
          status = common::Annotate(any.status(), absl::StrCat("before iteration ", i + 1));
          break;
        }
        if (*any && !stop) {
          absl::MutexLock lock(&mu);
          job->cancel.store(true);
          if (job->record.state == JobState::kRunning) {
            ChangeState(*job, JobState::kCancelling, "cancelled on another rank of its world");
          }
        }
        stop = *any;
      }
      if (stop) {
        if (checkpoints && i > start_iteration && job->record.checkpoint_iteration != i &&
            writing_iteration != i) {
          status = take_checkpoint(i);
        }
        if (status.ok()) status = finish_checkpoint();
        if (status.ok()) status = absl::CancelledError("cancelled");
        break;
      }
      auto m = runtime->RunIteration();
      if (!m.ok()) {
        status = job->cancel.load() && absl::IsCancelled(m.status())
                     ? absl::CancelledError("cancelled")
                     : common::Annotate(m.status(), absl::StrCat("iteration ", i + 1));
        break;
      }
      if (collective != nullptr) {
        // The world's loss: the mean of the ranks'.
        absl::StatusOr<double> loss = collective->AllReduceMean(m->loss);
        if (!loss.ok()) {
          status = common::Annotate(loss.status(), absl::StrCat("iteration ", i + 1));
          break;
        }
        m->loss = *loss;
      }
      seconds += m->seconds;
      compute_per_iteration.push_back(m->compute_s);
      balance_per_iteration.push_back(BalanceOf(*m));
      if (spec.recipe.EvalDue(i + 1, spec.iterations)) {
        absl::StatusOr<EvalMetrics> eval = runtime->Evaluate(spec.recipe.eval_iterations);
        if (!eval.ok()) {
          status = job->cancel.load() && absl::IsCancelled(eval.status())
                       ? absl::CancelledError("cancelled")
                       : common::Annotate(eval.status(),
                                          absl::StrCat("evaluating after iteration ", i + 1));
          break;
        }
        eval_loss = eval->loss;
        eval_iteration = i + 1;
        absl::MutexLock lock(&mu);
        Log(*job, absl::StrFormat("evaluation after iteration %d: loss %.6g (%d minibatches, "
                                  "%d samples, %.3f s)",
                                  i + 1, eval->loss, eval->minibatches, eval->samples,
                                  eval->seconds),
            /*daemon_too=*/false);
      }
      if (tensorboard != nullptr) {
        status = tensorboard->AddIteration(*m);
        if (!status.ok()) break;
      }
      JobProgress p;
      p.eval_loss = eval_loss;
      p.eval_iteration = eval_iteration;
      p.iteration = i + 1;
      p.iterations = spec.iterations;
      p.loss = m->loss;
      p.learning_rate = m->learning_rate;
      p.clipping = m->clipping;
      p.grad_norm = m->grad_norm;
      p.clip_coef = m->clip_coef;
      p.samples_per_s = m->samples_per_s;
      p.swap_in_bytes = m->bytes.to_device();
      p.swap_out_bytes = m->bytes.to_host();
      p.eta_s = seconds / (i + 1 - start_iteration) * (spec.iterations - i - 1);
      p.iteration_s = m->seconds;
      p.time = absl::Now();
      p.device_peak_bytes = m->device_peak_bytes;
      p.emulated_link = m->emulated_link;
      if (checkpointer.written()) {  // Recorded as soon as it is on disk.
        status = finish_checkpoint();
        if (!status.ok()) break;
      }
      bool due = checkpointer.Due(i + 1) || (checkpoints && i + 1 == spec.iterations);
      if (collective != nullptr) {  // Rank 0's clock may differ: any rank's.
        absl::StatusOr<bool> any = AnyRank(*collective, due);
        if (!any.ok()) {
          status = any.status();
          break;
        }
        due = *any;
      }
      if (due) {
        status = take_checkpoint(i + 1);
        if (!status.ok()) break;
      }
      {
        absl::MutexLock lock(&mu);
        job->record.progress = p;
        Log(*job, absl::StrFormat("iteration %d/%d loss %.6g %.1f samples/s to devices %s "
                                  "to host %s lr %.4g%s",
                                  p.iteration, p.iterations, p.loss, p.samples_per_s,
                                  FormatBytes(p.swap_in_bytes), FormatBytes(p.swap_out_bytes),
                                  p.learning_rate,
                                  p.clipping ? absl::StrFormat(" grad norm %.4g%s", p.grad_norm,
                                                               p.clip_coef < 1 ? " (clipped)" : "")
                                             : std::string()),
            /*daemon_too=*/false);
        JobEvent event;
        event.kind = JobEvent::Kind::kProgress;
        event.job_id = spec.id;
        event.progress = p;
        Emit(event);
        // Progress reaches the disk at most once a second (and at the end).
        if (p.time - job->last_persisted >= absl::Seconds(1) || i + 1 == spec.iterations) {
          job->last_persisted = p.time;
          MarkDirty(*job);
        }
      }
      Sync();
    }
    if (absl::Status s = finish_checkpoint(); status.ok()) status = s;
    if (status.ok()) {
      const ComputeCheck compute =
          CheckComputeAgainstPlan(compute_per_iteration, job->plan->estimates().compute_s(),
                                  server_devices.kind == common::DeviceSpec::Kind::kCuda);
      const BalanceCheck balance = CheckDeviceBalance(std::move(balance_per_iteration));
      absl::MutexLock lock(&mu);
      if (!compute.text.empty()) Log(*job, compute.text, /*daemon_too=*/compute.off);
      if (!balance.text.empty()) Log(*job, balance.text, /*daemon_too=*/false);
    }
    if (status.ok() && !spec.output_path.empty()) {
      std::error_code exists_error;
      if (!spec.overwrite && std::filesystem::exists(spec.output_path, exists_error)) {
        // It appeared after the submission: left as it is.
        status = absl::AlreadyExistsError(absl::StrCat(
            "the trained model was not written to ", spec.output_path,
            ": the file appeared after the job was submitted (--overwrite replaces it)"));
      } else {
        status = common::Annotate(runtime->SaveModel(spec.output_path),
                                  absl::StrCat("writing the trained model to ", spec.output_path));
      }
      if (!status.ok()) {
        // Nothing trained is lost: the model is kept in the state directory.
        const std::string kept = store->KeptModelPath(spec.id);
        if (runtime->SaveModel(kept).ok()) {
          absl::MutexLock lock(&mu);
          job->record.kept_model_path = kept;
          status = absl::Status(status.code(),
                                absl::StrCat(status.message(), "; the trained model is kept at ",
                                             kept, " (harmony-ctl status shows it)"));
        }
      }
    }
    if (status.ok()) {
      // Kept for harmony-ctl fetch, which brings it to the caller with the
      // caller's rights.
      status = common::Annotate(runtime->SaveModel(store->TrainedModelPath(spec.id)),
                                "keeping the trained model in the state directory");
    }
    if (status.ok()) {
      absl::MutexLock lock(&mu);
      const double loss = job->record.progress ? job->record.progress->loss : 0;
      done_reason = absl::StrFormat("trained %d iterations in %.2f s, loss %.6g%s%s",
                                    spec.iterations, seconds, loss,
                                    eval_iteration > 0
                                        ? absl::StrFormat(", eval loss %.6g", eval_loss)
                                        : "",
                                    spec.output_path.empty()
                                        ? ""
                                        : absl::StrCat(", model written to ", spec.output_path));
    }
    {
      absl::MutexLock lock(&mu);
      job->runtime = nullptr;
    }
    // `runtime` is destroyed here: the job's device and host memory is freed
    // before the devices are handed to the next job.
  }
  {
    absl::MutexLock lock(&mu);
    for (std::string& owner : device_owner) {
      if (owner == spec.id) owner.clear();
    }
    host_reserved -= spec.host_memory_bytes;
    if (status.ok()) {
      ChangeState(*job, JobState::kSucceeded, done_reason);
    } else if (job->stopped_by_daemon && !job->record.checkpoint_path.empty()) {
      // Picked up again, from the checkpoint, when the daemon starts next.
      ChangeState(*job, JobState::kQueued,
                  absl::StrCat("daemon stopped; resumes from iteration ",
                               job->record.checkpoint_iteration, " when it starts again"));
    } else if (job->stopped_by_daemon) {
      ChangeState(*job, JobState::kFailed, "daemon stopped");
    } else if (job->cancel.load() && absl::IsCancelled(status)) {
      ChangeState(*job, JobState::kCancelled,
                  absl::StrFormat("cancelled after %.1f s; its memory is freed",
                                  absl::ToDoubleSeconds(absl::Now() - start)));
    } else {
      ChangeState(*job, JobState::kFailed, std::string(status.message()));
    }
    finished.push_back(spec.id);
    Schedule();
  }
  Sync();
}

}  // namespace harmony::executor
