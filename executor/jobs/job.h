// Jobs as the daemon's core sees them (docs/DESIGN.md §7): what was asked for, the
// state it is in and how it got there, and its progress. Domain types only:
// the gRPC service translates them to and from proto/executor.proto at the
// edge; the state directory stores them as JSON (job_store.h).
//
// Thread-safety: plain values.

#ifndef HARMONY_EXECUTOR_JOBS_JOB_H_
#define HARMONY_EXECUTOR_JOBS_JOB_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "executor/runtime/recipe.h"
#include "optim/cpu_optimizer.h"
#include "proto/plan.pb.h"

namespace harmony::executor {

// QUEUED -> RUNNING -> SUCCEEDED | FAILED | CANCELLED, with CANCELLING
// between RUNNING and CANCELLED. A queued job cancelled goes straight to
// CANCELLED; a job that fails to start goes from QUEUED or RUNNING to FAILED.
enum class JobState { kQueued, kRunning, kCancelling, kSucceeded, kFailed, kCancelled };

// "QUEUED", "RUNNING", ...
absl::string_view JobStateName(JobState state);
// The inverse; nullopt for anything else.
std::optional<JobState> ParseJobState(absl::string_view name);
// SUCCEEDED, FAILED and CANCELLED.
bool IsTerminal(JobState state);

// A job trained by several daemons together (proto WorldSpec, docs/DESIGN.md §8):
// each rank runs the plan on its own devices on its share of every
// minibatch. Not a world job when fewer than two daemons are named.
struct WorldInfo {
  std::vector<std::string> daemons;  // host:port of each rank's daemon.
  int rank = 0;                      // This daemon's.
  std::string world_id;              // The same on every rank.
  std::string store;                 // host:port of rank 0's store.
  std::vector<std::string> job_ids;  // Every rank's job id (from the start).
  bool shard_optimizer_state = false;
  double timeout_s = 60;  // Waiting for the other ranks, then failing.

  bool active() const { return daemons.size() > 1; }
  int size() const { return static_cast<int>(daemons.size()); }
};

// What a user submits, after the service has parsed it. The plan is an
// immutable value shared by the job's record and its run.
struct JobSpec {
  std::shared_ptr<const proto::Plan> plan;
  // A TorchScript file on the server, or the file's bytes (the daemon keeps
  // them in its state directory; model_path is then ignored).
  std::string model_path;
  std::string model_bytes;
  std::string data_path;
  // Or the data's (and the evaluation data's) bytes, with the file's name:
  // kept in the state directory, which data_path (recipe.eval_data) then
  // names.
  std::string data_bytes, data_name, eval_data_bytes, eval_data_name;
  // A token file's (data and evaluation data): the ids' type of a .bin,
  // the tokens per sample (common/token_file.h).
  std::string token_dtype;
  int64_t seq_len = 0;
  // TensorBoard event files go here; empty: the state dir's
  // tensorboard/<job id>.
  std::string tensorboard_dir;
  // The precision the submitter expects (true: bf16); unset: the plan's.
  std::optional<bool> bf16;
  // output_path may replace an existing file; otherwise one is refused at
  // submit, and at the end if it appeared meanwhile.
  bool overwrite = false;
  int64_t iterations = 0;
  optim::OptimizerOptions optimizer;
  // Schedules, clipping, weight-decay groups (resolved for `iterations`).
  TrainingRecipe recipe;
  // Where the trained model is written; empty: not written.
  std::string output_path;
  // A checkpoint (executor/runtime/checkpoint.h) every N iterations, at the
  // end and when the job is cancelled (0: none).
  int64_t checkpoint_interval = 0;
  // Also every T minutes (0: not by time); either turns checkpoints on.
  double checkpoint_minutes = 0;
  // The latest checkpoints kept on disk.
  int keep_checkpoints = 2;
  // Start from this checkpoint file (a finished or cancelled job's, or any
  // of the same model): its iteration counts towards `iterations`.
  std::string resume_from;
  // Resubmitting a spec with the same non-empty id returns the first job.
  std::string submission_id;
  // Shuffles the samples with this seed; 0 takes them in order.
  uint64_t seed = 0;
  // Denormals flushed to zero; unset: the policy of the plan's profile.
  std::optional<bool> flush_denormal;
  std::string name;
  // Several daemons train it together; it is admitted held and waits for
  // JobManager::StartWorld.
  WorldInfo world;
};

struct StateChange {
  JobState state = JobState::kQueued;
  absl::Time time;
  std::string reason;
};

// After iteration `iteration` (from 1) of `iterations`.
struct JobProgress {
  int64_t iteration = 0;
  int64_t iterations = 0;
  double loss = 0;
  double samples_per_s = 0;
  double learning_rate = 0;
  bool clipping = false;  // Then the gradients' norm and the factor (1: not clipped).
  double grad_norm = 0;
  double clip_coef = 1;
  uint64_t swap_in_bytes = 0;   // Host to devices, in that iteration.
  uint64_t swap_out_bytes = 0;  // Devices to host.
  double eta_s = 0;
  double iteration_s = 0;  // Wall time of that iteration.
  absl::Time time;
  std::vector<uint64_t> device_peak_bytes;
  bool emulated_link = false;
  // The latest evaluation (--eval-data): its loss and the iteration it
  // followed (0: none yet).
  double eval_loss = 0;
  int64_t eval_iteration = 0;
};

// One job, as listed and persisted.
struct JobRecord {
  std::string id;
  std::string name;
  std::string submission_id;
  JobState state = JobState::kQueued;
  std::string reason;  // Of the latest state change.
  std::vector<StateChange> history;
  absl::Time submitted_at;

  // What was asked for.
  std::string model_sha256;
  std::string model_path;  // Where the daemon reads it (maybe its own copy).
  std::string data_path;
  std::string token_dtype;  // A token file's, as JobSpec.
  int64_t seq_len = 0;
  std::string tensorboard_dir;  // Where its event files are (resolved).
  bool bf16 = false;            // The plan trains in bf16.
  bool overwrite = false;       // As JobSpec.
  std::string output_path;
  int64_t iterations = 0;
  optim::OptimizerOptions optimizer;
  TrainingRecipe recipe;
  int64_t checkpoint_interval = 0;
  double checkpoint_minutes = 0;
  int keep_checkpoints = 2;
  uint64_t seed = 0;
  std::optional<bool> flush_denormal;  // Unset: the plan's profile's.

  // From the plan: what it needs.
  int num_devices = 0;
  uint64_t device_memory_bytes = 0;
  uint64_t host_memory_bytes = 0;
  std::string mode;  // "vPP" or "vDP".

  // Devices it runs on (while running) or ran on.
  std::vector<int> devices;
  std::optional<JobProgress> progress;
  // The latest checkpoint written, if any, and its iteration.
  std::string checkpoint_path;
  int64_t checkpoint_iteration = 0;
  // The checkpoint it starts from (submitted with one, or requeued after a
  // daemon restart), and the iteration it resumed at (-1: from the start).
  std::string resume_from;
  int64_t resumed_from_iteration = -1;
  // Where the trained model was kept when writing it to output_path failed.
  std::string kept_model_path;
  // A world job, and whether it still waits for its start (held jobs are
  // not in the queue).
  WorldInfo world;
  bool held = false;
};

// What WatchJob streams: progress after each iteration, each state change,
// and the job's log lines.
struct JobEvent {
  enum class Kind { kProgress, kStateChange, kLog };
  Kind kind = Kind::kLog;
  std::string job_id;
  JobProgress progress;
  StateChange state_change;
  std::string log;
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_JOBS_JOB_H_
