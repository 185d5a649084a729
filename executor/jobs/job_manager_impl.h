// JobManager::Impl: the job manager's state, shared by the files that
// implement it (internal to executor/jobs):
//   - job_manager.cc: Create (records of an earlier run), Submit (admission),
//     the queries, Cancel, Watch;
//   - job_runner.cc: Run, one job's training on its devices (checkpoints,
//     resume, the trained model).
//
// Thread-safety: the state is guarded by `mu` as annotated.

#ifndef HARMONY_EXECUTOR_JOBS_JOB_MANAGER_IMPL_H_
#define HARMONY_EXECUTOR_JOBS_JOB_MANAGER_IMPL_H_

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "executor/jobs/job_manager.h"
#include "executor/jobs/path_policy.h"
#include "executor/jobs/job_store.h"
#include "executor/runtime/device.h"
#include "executor/runtime/runtime.h"

namespace harmony::executor {

class Collective;

// The devices' names, "cpu:0,cpu:1" or "cuda:0.0,cuda:0.1" (a daemon on
// CUDA partitions named them cpu:N before).
inline std::string DevicesText(const std::vector<int>& devices,
                               const std::vector<DeviceInfo>& infos) {
  return absl::StrJoin(devices, ",", [&infos](std::string* out, int d) {
    if (d >= 0 && d < static_cast<int>(infos.size())) {
      absl::StrAppend(out, infos[d].name);
    } else {
      absl::StrAppend(out, "device ", d, " (of ", infos.size(), ")");
    }
  });
}

struct JobManager::Impl {
  struct Job {
    JobRecord record;
    std::shared_ptr<const proto::Plan> plan;
    // Set by Cancel and by the manager's destructor; read by the runtime at
    // task boundaries.
    std::atomic<bool> cancel{false};
    bool stopped_by_daemon = false;
    std::thread thread;
    // While running: the job's runtime, for Devices(). Set and cleared by the
    // job's thread under `mu`; the runtime is destroyed only after clearing.
    const Runtime* runtime = nullptr;
    absl::Time last_persisted = absl::InfinitePast();
  };

  struct Watcher {
    std::string job_id;
    const void* owner;
    Listener listener;
  };

  // Constant after Create. options.devices' count and capacity are what
  // the server's devices give (for "cuda": the GPUs and the smallest one's
  // memory); `server_devices` is the spec as given, for the runtime, and
  // `device_infos` each device's name and bytes.
  JobManagerOptions options;
  common::DeviceSpec server_devices;
  std::vector<DeviceInfo> device_infos;
  std::optional<JobStore> store;
  std::optional<PathPolicy> paths;  // What jobs may name.
  uint64_t host_total = 0;

  mutable absl::Mutex mu;
  mutable absl::CondVar ended;  // Signalled when a job ends.
  std::map<std::string, std::unique_ptr<Job>> jobs ABSL_GUARDED_BY(mu);
  std::vector<std::string> order ABSL_GUARDED_BY(mu);  // Submission order.
  std::deque<std::string> queue ABSL_GUARDED_BY(mu);
  std::map<std::string, std::string> by_submission ABSL_GUARDED_BY(mu);
  std::vector<std::string> device_owner ABSL_GUARDED_BY(mu);  // Job id or "".
  uint64_t host_reserved ABSL_GUARDED_BY(mu) = 0;
  int64_t next_id ABSL_GUARDED_BY(mu) = 1;
  std::vector<Watcher> watchers ABSL_GUARDED_BY(mu);
  std::vector<std::string> finished ABSL_GUARDED_BY(mu);  // Threads to join.
  bool stopping ABSL_GUARDED_BY(mu) = false;
  // Records to write and log lines to append, in the order they happened;
  // written by Sync outside `mu`.
  std::vector<std::string> dirty ABSL_GUARDED_BY(mu);
  struct LogLine {
    std::string job_id;
    std::string line;
    bool daemon_too;
  };
  std::vector<LogLine> pending_logs ABSL_GUARDED_BY(mu);

  // Serialises Sync: a snapshot taken later is written later.
  absl::Mutex sync_mu;

  Job* Find(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = jobs.find(id);
    return it == jobs.end() ? nullptr : it->second.get();
  }

  // A line of the job's log; `daemon_too` also prints it in the daemon's
  // (job events only, not each iteration).
  void Log(Job& job, std::string line, bool daemon_too = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    pending_logs.push_back({job.record.id, std::move(line), daemon_too});
  }

  void MarkDirty(const Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    dirty.push_back(job.record.id);
  }

  void Emit(const JobEvent& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const bool last = event.kind == JobEvent::Kind::kStateChange &&
                      IsTerminal(event.state_change.state);
    std::vector<Watcher> keep;
    for (Watcher& w : watchers) {
      if (w.job_id != event.job_id) {
        keep.push_back(std::move(w));
        continue;
      }
      if (w.listener(event) && !last) keep.push_back(std::move(w));
    }
    watchers = std::move(keep);
  }

  void ChangeState(Job& job, JobState state, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    StateChange change{state, absl::Now(), reason};
    job.record.state = state;
    job.record.reason = reason;
    job.record.history.push_back(change);
    Log(job, absl::StrCat(JobStateName(state), reason.empty() ? "" : ": ", reason));
    MarkDirty(job);
    JobEvent event;
    event.kind = JobEvent::Kind::kStateChange;
    event.job_id = job.record.id;
    event.state_change = change;
    Emit(event);
    if (IsTerminal(state)) ended.SignalAll();
  }

  // Writes dirty records and pending log lines. Called without `mu`.
  void Sync() ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock sync_lock(&sync_mu);
    std::vector<JobRecord> records;
    std::vector<LogLine> lines;
    {
      absl::MutexLock lock(&mu);
      std::sort(dirty.begin(), dirty.end());
      dirty.erase(std::unique(dirty.begin(), dirty.end()), dirty.end());
      for (const std::string& id : dirty) {
        if (Job* job = Find(id)) records.push_back(job->record);
      }
      dirty.clear();
      lines.swap(pending_logs);
    }
    // File I/O without `mu`: the snapshots were taken under `sync_mu`, so
    // a newer snapshot of a record is never overwritten by an older one.
    for (const JobRecord& r : records) {
      if (absl::Status s = store->Save(r); !s.ok() && options.log) {
        options.log(absl::StrCat("warning: cannot save job ", r.id, ": ", s.message()));
      }
    }
    for (const LogLine& l : lines) {
      const std::string stamped =
          absl::StrCat(absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::Now(), absl::LocalTimeZone()),
                       "  ", l.line);
      (void)store->AppendLog(l.job_id, stamped);
      if (options.log && l.daemon_too) options.log(absl::StrCat(l.job_id, " ", l.line));
    }
  }

  // Starts queued jobs from the head while their devices and host memory
  // are free.
  void Schedule() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    while (!queue.empty() && !stopping) {
      Job* job = Find(queue.front());
      const int need = job->record.num_devices;
      std::vector<int> free;
      for (int d = 0; d < static_cast<int>(device_owner.size()); ++d) {
        if (device_owner[d].empty()) free.push_back(d);
      }
      const bool alone = free.size() == device_owner.size();
      if (static_cast<int>(free.size()) < need) return;
      if (!alone && host_reserved + job->record.host_memory_bytes > host_total) return;
      queue.pop_front();
      free.resize(need);
      for (int d : free) device_owner[d] = job->record.id;
      host_reserved += job->record.host_memory_bytes;
      job->record.devices = free;
      ChangeState(*job, JobState::kRunning,
                  absl::StrCat("started on ", DevicesText(free, device_infos)));
      job->thread = std::thread([this, job] { Run(job); });
    }
  }

  // The job's thread.
  void Run(Job* job) ABSL_LOCKS_EXCLUDED(mu);
  // A world job's rank joins its world and checks that every rank runs the
  // same job (executor/dist).
  absl::StatusOr<std::unique_ptr<Collective>> JoinWorld(Job& job, const JobRecord& spec)
      ABSL_LOCKS_EXCLUDED(mu);

  // Joins the threads of jobs that have ended. Called without `mu`.
  void JoinFinished() ABSL_LOCKS_EXCLUDED(mu) {
    std::vector<Job*> done;
    {
      absl::MutexLock lock(&mu);
      for (const std::string& id : finished) done.push_back(Find(id));
      finished.clear();
    }
    for (Job* job : done) {
      if (job->thread.joinable()) job->thread.join();
    }
  }
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_JOBS_JOB_MANAGER_IMPL_H_
