#include "executor/client/world_submit.h"

#include <memory>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace harmony::executor {

std::vector<std::string> ParseWorldList(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(part));
  }
  return out;
}

absl::StatusOr<WorldJob> SubmitToWorld(const ClientOptions& base, const WorldSubmission& world,
                                       const proto::SubmitJobRequest& request) {
  const int n = static_cast<int>(world.daemons.size());
  if (n < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a world needs at least 2 daemons; --world names ", n));
  }
  std::set<std::string> seen;
  for (const std::string& d : world.daemons) {
    if (!seen.insert(d).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--world lists daemon ", d, " twice: each rank needs a daemon of its own"));
    }
  }
  WorldJob job;
  std::random_device random;
  job.world_id = absl::StrFormat("world-%08x%08x", random(), random());
  std::vector<std::unique_ptr<ExecutorClient>> clients;
  for (const std::string& d : world.daemons) {
    ClientOptions o = base;
    o.address = d;
    clients.push_back(ExecutorClient::Create(o));
  }
  proto::WorldSpec spec;
  for (const std::string& d : world.daemons) spec.add_daemons(d);
  spec.set_world_id(job.world_id);
  spec.set_shard_optimizer_state(world.shard_optimizer_state);
  spec.set_timeout_s(world.timeout_s);

  // Cancels what was admitted, and says why nothing runs.
  auto none = [&](int rank, const absl::Status& why) -> absl::Status {
    for (size_t r = 0; r < job.job_ids.size(); ++r) {
      if (!job.job_ids[r].empty()) (void)clients[r]->Cancel(job.job_ids[r], /*from_peer=*/true);
    }
    return absl::Status(why.code(), absl::StrCat("admitted on none of the ", n, " daemons: rank ",
                                                 rank, " (", world.daemons[rank], "): ",
                                                 why.message()));
  };
  // 1. Every daemon admits it, held.
  job.job_ids.assign(n, "");
  for (int r = 0; r < n; ++r) {
    proto::SubmitJobRequest mine = request;
    *mine.mutable_world() = spec;
    mine.mutable_world()->set_rank(static_cast<uint32_t>(r));
    if (r != 0) {  // Rank 0 writes the model and reads the checkpoint.
      mine.clear_output_path();
      mine.clear_resume();
    }
    if (!request.submission_id().empty()) {
      mine.set_submission_id(absl::StrCat(request.submission_id(), "@rank", r));
    }
    absl::StatusOr<proto::SubmitJobResponse> got = clients[r]->Submit(mine);
    if (!got.ok()) return none(r, got.status());
    job.job_ids[r] = got->job_id();
    if (r == 0) job.store = got->store();
  }
  // The same model everywhere (each daemon checked its file against the plan;
  // the plans could still differ).
  std::string sha0;
  for (int r = 0; r < n; ++r) {
    absl::StatusOr<proto::Job> j = clients[r]->GetJob(job.job_ids[r], /*local_only=*/true);
    if (!j.ok()) return none(r, j.status());
    if (r == 0) sha0 = j->model_sha256();
    if (j->model_sha256() != sha0) {
      return none(r, absl::FailedPreconditionError(absl::StrCat(
                         "its model (sha256 ", j->model_sha256().substr(0, 16),
                         "...) is not rank 0's (", sha0.substr(0, 16), "...)")));
    }
  }
  // 2. Every daemon starts it, knowing the whole world.
  spec.set_store(job.store);
  for (const std::string& id : job.job_ids) spec.add_job_ids(id);
  for (int r = 0; r < n; ++r) {
    proto::StartWorldJobRequest start;
    start.set_job_id(job.job_ids[r]);
    *start.mutable_world() = spec;
    start.mutable_world()->set_rank(static_cast<uint32_t>(r));
    absl::StatusOr<proto::Job> started = clients[r]->StartWorldJob(start);
    if (!started.ok()) return none(r, started.status());
  }
  return job;
}

}  // namespace harmony::executor
