// The gRPC face of the job manager (proto/executor.proto, callback API).
//
// A thin layer: each call checks the caller's token, translates the request
// into domain types (the plan is parsed and its schema checked here, once),
// calls the JobManager, and translates the answer back. The job manager
// never sees gRPC. Errors keep their canonical codes (ToGrpcStatus).
//
// Authentication: with a token, every call must carry the metadata
// "authorization: Bearer <token>"; a missing or wrong one is UNAUTHENTICATED.
//
// Thread-safety: thread-safe; gRPC calls it from its own threads.

#ifndef HARMONY_EXECUTOR_SERVICE_SERVICE_H_
#define HARMONY_EXECUTOR_SERVICE_SERVICE_H_

#include <functional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "executor/client/client.h"
#include "executor/jobs/job_manager.h"
#include "proto/executor.grpc.pb.h"

namespace harmony::executor {

// The one place absl::Status becomes grpc::Status (same code, same message).
grpc::Status ToGrpcStatus(const absl::Status& status);

struct ServiceOptions {
  // Empty: calls need no token (loopback only; the daemon enforces that).
  std::string auth_token;
  // Models uploaded with SubmitJob may be at most this large.
  uint64_t max_model_bytes = 256ull << 20;
  // How this daemon calls the other daemons of a world job (to pass a
  // cancel on, to ask for their ranks' progress): the token and TLS roots
  // they want, as a client's (the address is each peer's).
  ClientOptions peer;
};

class ExecutorService final : public proto::Executor::CallbackService {
 public:
  // `manager` is borrowed and outlives the service.
  ExecutorService(JobManager* manager, ServiceOptions options);

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const proto::SubmitJobRequest* request,
                                      proto::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const proto::GetJobRequest* request,
                                   proto::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const proto::ListJobsRequest* request,
                                     proto::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const proto::CancelJobRequest* request,
                                      proto::Job* response) override;
  grpc::ServerWriteReactor<proto::JobEvent>* WatchJob(
      grpc::CallbackServerContext* context, const proto::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* GetDevices(grpc::CallbackServerContext* context,
                                       const proto::GetDevicesRequest* request,
                                       proto::GetDevicesResponse* response) override;
  grpc::ServerUnaryReactor* GetJobLogs(grpc::CallbackServerContext* context,
                                       const proto::GetJobLogsRequest* request,
                                       proto::GetJobLogsResponse* response) override;
  grpc::ServerUnaryReactor* FetchModel(grpc::CallbackServerContext* context,
                                       const proto::FetchModelRequest* request,
                                       proto::FetchModelResponse* response) override;
  grpc::ServerUnaryReactor* StartWorldJob(grpc::CallbackServerContext* context,
                                          const proto::StartWorldJobRequest* request,
                                          proto::Job* response) override;

 private:
  // OK, or UNAUTHENTICATED when a token is required and not presented.
  absl::Status Authenticate(const grpc::CallbackServerContext* context) const;
  // Authenticates, runs `work` (which fills the response), and finishes the
  // call with its status. Synchronous: `work` runs on gRPC's thread.
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                   const std::function<absl::Status()>& work);

  // A world job's other ranks, as their daemons report them (those that do
  // not answer within a few seconds say so), into `out`.
  void AddRanks(const JobRecord& job, proto::Job* out) const;
  // Passes a cancel on to a world job's other ranks; the ones not reached.
  std::vector<std::string> CancelPeers(const JobRecord& job) const;

  JobManager* const manager_;
  const ServiceOptions options_;
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_SERVICE_SERVICE_H_
