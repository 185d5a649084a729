// The job manager: the daemon's core (docs/DESIGN.md §7). It admits jobs, queues
// them, runs each on its own devices with the runtime, reports progress,
// cancels, and keeps every record in the state directory. It knows nothing
// of gRPC: the service (executor/service) translates requests into calls
// here.
//
// Scheduling: FIFO. The job at the head of the queue starts as soon as
// enough devices are free (and the host memory its plan needs); jobs behind
// it wait, so a large job is never starved by small ones. Jobs that need
// fewer devices than the server has run side by side on disjoint devices.
//
// Each running job has a thread that creates its Runtime (on virtual CPU
// devices of the server's size), trains, writes checkpoints and the trained
// model, and then releases its devices and host memory. Whatever goes wrong
// inside a job (bad data, out of memory, a non-finite loss) fails that job
// only.
//
// Persistence: every state change and progress report rewrites the job's
// record atomically (job_store.h). On Create, records from an earlier run
// are loaded: finished jobs stay as they were; jobs that were running are
// queued again, to resume from their latest checkpoint (or from the start
// without one), except a world job's rank, which fails (its world went on
// without it); queued jobs are queued again.
//
// Thread-safety: thread-safe. Listeners (Watch) are called with the
// manager's lock held, in event order: they must be quick, must not block
// and must not call back into the manager.

#ifndef HARMONY_EXECUTOR_JOBS_JOB_MANAGER_H_
#define HARMONY_EXECUTOR_JOBS_JOB_MANAGER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device_spec.h"
#include "executor/jobs/job.h"

namespace harmony::executor {

struct JobManagerOptions {
  // The server's devices: virtual CPU devices "cpu:NxSIZE".
  common::DeviceSpec devices;
  // Where records, plans, uploaded models and checkpoints live.
  std::string state_dir;
  // The directories under which a job may name files (data, model, output,
  // checkpoint to resume from, TensorBoard), besides the state directory;
  // empty: the working directory (executor/jobs/path_policy.h).
  std::vector<std::string> allowed_paths;
  // Submissions are refused (ResourceExhausted) while this many jobs wait.
  int max_queued = 64;
  // Host memory the jobs may use together, in bytes; 0: what the machine
  // has available when the manager is created.
  uint64_t host_memory = 0;
  // Called with one line per job event (submitted, started, each state
  // change); the daemon prints them. May be empty.
  std::function<void(const std::string&)> log;
};

struct SubmitResult {
  std::string job_id;
  bool already_submitted = false;  // The submission id matched a job.
  std::string store;  // Rank 0 of a world: where it hosts the world's store.
};

struct DeviceStatus {
  int index = 0;
  std::string name;  // "cpu:0"
  uint64_t memory_bytes = 0;
  uint64_t used_bytes = 0;
  std::string job_id;  // Empty when free.
};

struct DevicesStatus {
  std::string kind;  // "cpu"
  std::vector<DeviceStatus> devices;
  uint64_t host_memory_bytes = 0;
  uint64_t host_reserved_bytes = 0;  // By running jobs' plans.
};

class JobManager {
 public:
  // Listeners get each event of a job; returning false unsubscribes.
  using Listener = std::function<bool(const JobEvent&)>;

  // FailedPrecondition for devices other than virtual CPU devices or a state
  // directory that cannot be used.
  static absl::StatusOr<std::unique_ptr<JobManager>> Create(const JobManagerOptions& options);

  // Cancels running jobs (each is recorded FAILED, "daemon stopped"), waits
  // for their threads, and keeps queued jobs queued for the next start.
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Admits a job and returns its id at once. Each check has its own error:
  //   InvalidArgument     iterations < 1, a malformed plan, negative settings;
  //   FailedPrecondition  a plan of another schema, a model whose SHA-256
  //                       differs from the plan's, more or larger devices
  //                       than the server has, more host memory than it has;
  //   NotFound / PermissionDenied  a model or data file that cannot be read,
  //                       an output directory that cannot be written;
  //   ResourceExhausted   the queue is full.
  // A known submission id returns that job (already_submitted), unchecked.
  absl::StatusOr<SubmitResult> Submit(JobSpec spec);

  // A job of a world (spec.world) is admitted held: checked as any job, and
  // for rank 0 a store port picked, but not queued until StartWorld gives it
  // the whole world (every rank's job id). InvalidArgument for a world that
  // names a daemon twice, has fewer than 2, or a rank outside it.
  //
  // Queues held job `id` with `world` (the same daemons and id, the store,
  // every rank's job id). An already started job is returned as it is;
  // FailedPrecondition for a job cancelled meanwhile or of another world.
  absl::StatusOr<JobRecord> StartWorld(const std::string& id, const WorldInfo& world);
  // NotFound for an unknown id.
  absl::StatusOr<JobRecord> Get(const std::string& id) const;
  // In submission order; every job when `states` is empty.
  std::vector<JobRecord> List(const std::vector<JobState>& states) const;

  // A queued job is CANCELLED at once; a running one becomes CANCELLING and
  // stops at the next task boundary, then CANCELLED, its memory freed. A job
  // that already ended is returned as it is. NotFound for an unknown id.
  absl::StatusOr<JobRecord> Cancel(const std::string& id);

  // The job's log lines (they survive restarts). NotFound for an unknown id.
  absl::StatusOr<std::vector<std::string>> Logs(const std::string& id) const;
  // The file holding job `id`'s trained model (once it succeeded, or kept
  // after its output failed), or with `checkpoint` its latest checkpoint.
  // NotFound for no such job; FailedPrecondition naming the job's state
  // when there is none yet.
  absl::StatusOr<std::string> ModelFile(const std::string& id, bool checkpoint) const;

  // Subscribes `listener` (identified by `owner`) to the job: it is called
  // at once with the job's latest state change and progress, then with each
  // new event; after the event that ends the job it is not called again.
  // NotFound for an unknown id.
  absl::Status Watch(const std::string& id, const void* owner, Listener listener);
  // After Unwatch returns, the owner's listener is not running and will not
  // be called again. Unknown owners are ignored.
  void Unwatch(const void* owner);

  DevicesStatus Devices() const;

  // Blocks until the job has ended (tests and `harmony-exec` shutdown);
  // NotFound for an unknown id.
  absl::StatusOr<JobRecord> WaitForEnd(const std::string& id) const;

 private:
  struct Impl;
  explicit JobManager(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_JOBS_JOB_MANAGER_H_
