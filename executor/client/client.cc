#include "executor/client/client.h"

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/executor.grpc.pb.h"

namespace harmony::executor {

std::string TokenPathIn(const std::string& state_dir) {
  return state_dir.empty() || state_dir.back() == '/' ? state_dir + "token"
                                                       : state_dir + "/token";
}

struct ExecutorClient::Impl {
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<proto::Executor::Stub> stub;

  void Prepare(grpc::ClientContext* context, bool with_deadline) const {
    if (!options.token.empty()) {
      context->AddMetadata("authorization", "Bearer " + options.token);
    }
    if (with_deadline) context->set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
  }

  // The connection, or Unavailable naming the address.
  absl::Status Connect() const {
    if (channel->WaitForConnected(absl::ToChronoTime(absl::Now() + options.connect_timeout))) {
      return absl::OkStatus();
    }
    return absl::UnavailableError(absl::StrCat(
        "daemon unreachable at ", options.address,
        " (is harmony-exec running there? start it with: harmony-exec --listen ",
        options.address, ")"));
  }

  absl::Status FromGrpc(const grpc::Status& s) const {
    if (s.ok()) return absl::OkStatus();
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      return absl::UnavailableError(
          absl::StrCat("daemon unreachable at ", options.address, ": ", s.error_message()));
    }
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      return absl::DeadlineExceededError(
          absl::StrCat("the daemon at ", options.address, " did not answer within ",
                       absl::FormatDuration(options.timeout)));
    }
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }

  template <typename Request, typename Response, typename Method>
  absl::StatusOr<Response> Call(Method method, const Request& request) const {
    if (absl::Status s = Connect(); !s.ok()) return s;
    grpc::ClientContext context;
    Prepare(&context, true);
    Response response;
    grpc::Status s = (stub.get()->*method)(&context, request, &response);
    if (!s.ok()) return FromGrpc(s);
    return response;
  }
};

ExecutorClient::ExecutorClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ExecutorClient::~ExecutorClient() = default;

std::unique_ptr<ExecutorClient> ExecutorClient::Create(const ClientOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.tls_root_certs.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_root_certs;
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  impl->channel = grpc::CreateCustomChannel(options.address, credentials, args);
  impl->stub = proto::Executor::NewStub(impl->channel);
  return std::unique_ptr<ExecutorClient>(new ExecutorClient(std::move(impl)));
}

const std::string& ExecutorClient::address() const { return impl_->options.address; }

absl::StatusOr<proto::SubmitJobResponse> ExecutorClient::Submit(
    const proto::SubmitJobRequest& request) {
  return impl_->Call<proto::SubmitJobRequest, proto::SubmitJobResponse>(
      &proto::Executor::Stub::SubmitJob, request);
}

absl::StatusOr<proto::Job> ExecutorClient::GetJob(const std::string& id, bool local_only) {
  proto::GetJobRequest request;
  request.set_job_id(id);
  request.set_local_only(local_only);
  return impl_->Call<proto::GetJobRequest, proto::Job>(&proto::Executor::Stub::GetJob, request);
}

absl::StatusOr<std::vector<proto::Job>> ExecutorClient::ListJobs() {
  auto response = impl_->Call<proto::ListJobsRequest, proto::ListJobsResponse>(
      &proto::Executor::Stub::ListJobs, proto::ListJobsRequest());
  if (!response.ok()) return response.status();
  return std::vector<proto::Job>(response->jobs().begin(), response->jobs().end());
}

absl::StatusOr<proto::Job> ExecutorClient::Cancel(const std::string& id, bool from_peer) {
  proto::CancelJobRequest request;
  request.set_job_id(id);
  request.set_from_peer(from_peer);
  return impl_->Call<proto::CancelJobRequest, proto::Job>(&proto::Executor::Stub::CancelJob,
                                                          request);
}

absl::StatusOr<proto::Job> ExecutorClient::StartWorldJob(
    const proto::StartWorldJobRequest& request) {
  return impl_->Call<proto::StartWorldJobRequest, proto::Job>(
      &proto::Executor::Stub::StartWorldJob, request);
}

absl::StatusOr<std::vector<std::string>> ExecutorClient::Logs(const std::string& id) {
  proto::GetJobLogsRequest request;
  request.set_job_id(id);
  auto response = impl_->Call<proto::GetJobLogsRequest, proto::GetJobLogsResponse>(
      &proto::Executor::Stub::GetJobLogs, request);
  if (!response.ok()) return response.status();
  return std::vector<std::string>(response->lines().begin(), response->lines().end());
}

absl::StatusOr<std::string> ExecutorClient::FetchModel(const std::string& id, bool checkpoint) {
  proto::FetchModelRequest request;
  request.set_job_id(id);
  request.set_checkpoint(checkpoint);
  auto response = impl_->Call<proto::FetchModelRequest, proto::FetchModelResponse>(
      &proto::Executor::Stub::FetchModel, request);
  if (!response.ok()) return response.status();
  return std::move(*response->mutable_data());
}

absl::StatusOr<proto::GetDevicesResponse> ExecutorClient::Devices() {
  return impl_->Call<proto::GetDevicesRequest, proto::GetDevicesResponse>(
      &proto::Executor::Stub::GetDevices, proto::GetDevicesRequest());
}

absl::Status ExecutorClient::Watch(const std::string& id,
                                   const std::function<bool(const proto::JobEvent&)>& on_event) {
  if (absl::Status s = impl_->Connect(); !s.ok()) return s;
  grpc::ClientContext context;
  impl_->Prepare(&context, false);
  proto::WatchJobRequest request;
  request.set_job_id(id);
  std::unique_ptr<grpc::ClientReader<proto::JobEvent>> reader =
      impl_->stub->WatchJob(&context, request);
  proto::JobEvent event;
  while (reader->Read(&event)) {
    if (!on_event(event)) {
      context.TryCancel();
      while (reader->Read(&event)) {
      }
      (void)reader->Finish();
      return absl::OkStatus();
    }
  }
  return impl_->FromGrpc(reader->Finish());
}

}  // namespace harmony::executor
