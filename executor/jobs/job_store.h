// The daemon's state directory:
//
//   DIR/jobs/<id>.json   a job's record (JSON), rewritten atomically (temp
//                        file, fsync, rename) at every state change and
//                        progress report, so a crash leaves the old record or
//                        the new, never a mix;
//   DIR/jobs/<id>.log    the job's log, one line per event (appended);
//   DIR/plans/<id>.pb    the job's plan, so a queued job survives a restart;
//   DIR/models/<sha>.pt  models uploaded with SubmitJob;
//   DIR/checkpoints/<id>/checkpoint-<iteration>.pt  the job's latest
//                        checkpoints (executor/runtime/checkpoint.h);
//   DIR/kept/<id>.pt     a trained model that could not be written where the
//                        job asked.
//
// Errors follow errno (see common/files.h) and name the path; a record that
// does not parse is InvalidArgument naming the file.
//
// Thread-safety: thread-compatible per job id (the job manager serialises
// writes of one record); different ids may be written concurrently.

#ifndef HARMONY_EXECUTOR_JOBS_JOB_STORE_H_
#define HARMONY_EXECUTOR_JOBS_JOB_STORE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "executor/jobs/job.h"
#include "proto/plan.pb.h"

namespace harmony::executor {

class JobStore {
 public:
  // Creates DIR and its sub-directories when missing; FailedPrecondition
  // when DIR exists but is not a writable directory.
  static absl::StatusOr<JobStore> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }

  absl::Status Save(const JobRecord& record) const;
  // Every record, in id order. Records that do not parse are skipped and
  // reported in `problems` (one line each), so one damaged file does not
  // hide the others.
  std::vector<JobRecord> LoadAll(std::vector<std::string>* problems) const;

  absl::Status AppendLog(const std::string& id, absl::string_view line) const;
  // The job's log lines; empty when it has none.
  absl::StatusOr<std::vector<std::string>> ReadLog(const std::string& id) const;

  absl::Status SavePlan(const std::string& id, const proto::Plan& plan) const;
  absl::StatusOr<proto::Plan> LoadPlan(const std::string& id) const;

  // Keeps uploaded model bytes; returns the path of the copy.
  absl::StatusOr<std::string> SaveModel(const std::string& sha256, absl::string_view bytes) const;
  // Keeps uploaded data bytes under data/, named by their sha256 and the
  // suffix of `file_name` (which tells a token file); returns the path.
  absl::StatusOr<std::string> SaveData(absl::string_view bytes,
                                       const std::string& file_name) const;

  // The job's checkpoint directory.
  std::string CheckpointDir(const std::string& id) const;
  // The job's TensorBoard event files, unless it was given a directory.
  std::string TensorBoardDir(const std::string& id) const;
  // Where a trained model is kept when its output path fails.
  std::string KeptModelPath(const std::string& id) const;
  // Every succeeded job's trained model, for harmony-ctl fetch.
  std::string TrainedModelPath(const std::string& id) const;

 private:
  explicit JobStore(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

// The record as JSON text, and back (InvalidArgument naming what is wrong).
std::string JobRecordToJson(const JobRecord& record);
absl::StatusOr<JobRecord> JobRecordFromJson(absl::string_view text);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_JOBS_JOB_STORE_H_
