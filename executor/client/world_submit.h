// Submitting one job to a world of daemons (docs/DESIGN.md §8): every
// daemon admits it or none does. Each rank's daemon first admits it held
// (all the usual checks: plan, model, data, memory); rank 0's picks where it
// will host the world's store. Only when all have admitted it, and the
// model is the same everywhere, is each started with the whole world (every
// rank's job id). Any refusal cancels the ones already admitted.
//
// Rank 0 gets the output path and the checkpoint to resume from; the
// others train on their slices and take part in the exchanges.

#ifndef HARMONY_EXECUTOR_CLIENT_WORLD_SUBMIT_H_
#define HARMONY_EXECUTOR_CLIENT_WORLD_SUBMIT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "executor/client/client.h"
#include "proto/executor.pb.h"

namespace harmony::executor {

struct WorldSubmission {
  std::vector<std::string> daemons;  // host:port, in rank order.
  bool shard_optimizer_state = false;
  double timeout_s = 60;
};

struct WorldJob {
  std::string world_id;
  std::string store;
  std::vector<std::string> job_ids;  // By rank.
};

// `base` gives the token and TLS roots for every daemon (the address is
// each daemon's). InvalidArgument for a list with fewer than 2 daemons or
// one named twice; otherwise the first refusal, naming the rank and daemon,
// after the job was cancelled wherever it had been admitted.
absl::StatusOr<WorldJob> SubmitToWorld(const ClientOptions& base, const WorldSubmission& world,
                                       const proto::SubmitJobRequest& request);

// "host1:port,host2:port" as a list (spaces ignored).
std::vector<std::string> ParseWorldList(const std::string& text);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_CLIENT_WORLD_SUBMIT_H_
