// The client library of harmony-exec's service (harmony-ctl and tests use
// it). Each call returns the daemon's answer or a Status whose message a
// person can act on: Unavailable "daemon unreachable at ADDRESS", NotFound
// "no job job-7", Unauthenticated "wrong token", with the daemon's codes
// kept as they are.
//
// Thread-safety: thread-safe; one client may serve many threads.

#ifndef HARMONY_EXECUTOR_CLIENT_CLIENT_H_
#define HARMONY_EXECUTOR_CLIENT_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/executor.pb.h"

namespace harmony::executor {

// Where a daemon keeps its token by default: STATE/token
// (executor/service/daemon_token.h makes it; harmony-ctl --state-dir reads it).
std::string TokenPathIn(const std::string& state_dir);

struct ClientOptions {
  std::string address = "127.0.0.1:7770";
  // Sent as "authorization: Bearer <token>" when not empty.
  std::string token;
  // PEM root certificate(s) to verify a TLS daemon; empty: plain text.
  std::string tls_root_certs;
  // How long to wait for the daemon to answer a call (not Watch).
  absl::Duration timeout = absl::Seconds(30);
  // How long to wait for a connection before saying it is unreachable.
  absl::Duration connect_timeout = absl::Seconds(5);
};

class ExecutorClient {
 public:
  static std::unique_ptr<ExecutorClient> Create(const ClientOptions& options);
  ~ExecutorClient();

  absl::StatusOr<proto::SubmitJobResponse> Submit(const proto::SubmitJobRequest& request);
  // `local_only`: a world job's daemon does not ask its peers for their ranks.
  absl::StatusOr<proto::Job> GetJob(const std::string& id, bool local_only = false);
  absl::StatusOr<std::vector<proto::Job>> ListJobs();
  // `from_peer`: the daemon does not pass the cancel on to a world's peers.
  absl::StatusOr<proto::Job> Cancel(const std::string& id, bool from_peer = false);
  absl::StatusOr<proto::Job> StartWorldJob(const proto::StartWorldJobRequest& request);
  absl::StatusOr<std::vector<std::string>> Logs(const std::string& id);
  // The job's trained model (or latest checkpoint) file's bytes.
  absl::StatusOr<std::string> FetchModel(const std::string& id, bool checkpoint);
  absl::StatusOr<proto::GetDevicesResponse> Devices();
  // Calls `on_event` with each event until the job ends (OK), `on_event`
  // returns false (OK, the stream is closed), or the stream breaks (its
  // error).
  absl::Status Watch(const std::string& id,
                     const std::function<bool(const proto::JobEvent&)>& on_event);

  const std::string& address() const;

 private:
  struct Impl;
  explicit ExecutorClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_CLIENT_CLIENT_H_
