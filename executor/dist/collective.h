// Collectives across servers (docs/DESIGN.md §8): the ranks of a job's
// world meet at a TCPStore that rank 0 hosts and talk through LibTorch's
// c10d ProcessGroupGloo. We do not write our own collective library.
//
// What Debian's LibTorch 1.13 Gloo offers, measured (collective_test):
// allreduce, reduce to a root, broadcast, allgather and barrier on CPU
// tensors; reduce_scatter is declared but throws "ProcessGroupGloo does not
// support reduce_scatter", so sharding optimizer state ZeRO-1 style reduces
// each shard to its owner instead.
//
// Every call takes CPU float tensors and fails, rather than hangs, when a
// peer does not join within the timeout: Unavailable naming the store or the
// operation and the seconds waited.
//
// Thread-safety: one thread calls a Collective at a time (c10d runs the
// operations on its own threads).

#ifndef HARMONY_EXECUTOR_DIST_COLLECTIVE_H_
#define HARMONY_EXECUTOR_DIST_COLLECTIVE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace harmony::executor {

// A TCP port free on this host now (bound to port 0, read, closed): where
// rank 0 will host a world's store.
int PickFreePort();

struct CollectiveOptions {
  // Where rank 0 hosts the store (host:port); rank 0 listens on the port.
  std::string store_host = "127.0.0.1";
  int store_port = 0;
  int rank = 0;
  int world_size = 1;
  // How long joining and each operation may wait for the other ranks.
  absl::Duration timeout = absl::Seconds(60);
  // How this rank is named to the others when it is gone ("daemon
  // host:port job-3"); empty: "host pid N".
  std::string who;
};

// Sets options.store_host and store_port from "host:port"; InvalidArgument
// naming the text otherwise.
absl::Status ParseStoreAddress(const std::string& host_port, CollectiveOptions& options);

class Collective {
 public:
  // Joins the world: returns once every rank has. InvalidArgument for a rank
  // outside [0, world_size) or a port outside [1, 65535]; Unavailable when
  // the others do not join within the timeout.
  static absl::StatusOr<std::unique_ptr<Collective>> Join(const CollectiveOptions& options);
  ~Collective();
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }

  // Sums `tensors` over the ranks, in place, on every rank.
  absl::Status AllReduceSum(std::vector<at::Tensor>& tensors);
  // The mean of `value` over the ranks (a loss), on every rank.
  absl::StatusOr<double> AllReduceMean(double value);
  // Sums them into `root`'s (the others' are left as they were).
  absl::Status ReduceSumTo(std::vector<at::Tensor>& tensors, int root);
  // `root`'s values into every rank's `tensors`.
  absl::Status Broadcast(std::vector<at::Tensor>& tensors, int root);
  // Every rank's `mine`, by rank, into `all` (world_size tensors shaped as
  // `mine`).
  absl::Status AllGather(const at::Tensor& mine, std::vector<at::Tensor>& all);
  absl::Status Barrier();

  // Bytes this rank has handed to collectives so far (each operation's
  // tensor bytes; what goes on the wire depends on Gloo's algorithm).
  uint64_t bytes() const { return bytes_; }

 private:
  struct Group;
  Collective(CollectiveOptions options, std::unique_ptr<Group> group);
  absl::Status Run(const char* what, uint64_t bytes, const std::function<void()>& op);
  // After a failed exchange: the ranks whose heartbeats stopped ("rank 1
  // (host pid 123)"), or empty.
  std::string WhoIsGone();

  CollectiveOptions options_;
  std::unique_ptr<Group> group_;
  uint64_t bytes_ = 0;
  bool failed_ = false;  // An exchange failed.
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_DIST_COLLECTIVE_H_
