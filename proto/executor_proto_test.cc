// The executor service schema: message round trips, and the generated gRPC
// code serving on loopback (a callback service answering GetDevices; the
// other methods answer UNIMPLEMENTED until the daemon implements them).

#include <memory>
#include <string>

#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/executor.grpc.pb.h"
#include "proto/executor.pb.h"

namespace harmony::proto {
namespace {

using google::protobuf::util::MessageDifferencer;

SubmitJobRequest MakeSubmit() {
  SubmitJobRequest request;
  request.set_plan(std::string("\x0d\x48\x52\x4d\x59", 5));
  request.set_model_path("/models/gpt.pt");
  request.set_data_path("/data/tokens.pt");
  request.set_iterations(100);
  request.mutable_optimizer()->set_kind(ADAMW);
  request.mutable_optimizer()->set_learning_rate(3e-4);
  request.mutable_optimizer()->set_weight_decay(0.01);
  request.set_output_path("/out/trained.pt");
  request.set_checkpoint_interval(10);
  request.set_submission_id("ci-run-42");
  request.set_seed(7);
  return request;
}

TEST(ExecutorProtoTest, SubmitRequestRoundTripsBinaryAndJson) {
  SubmitJobRequest request = MakeSubmit();
  SubmitJobRequest binary;
  ASSERT_TRUE(binary.ParseFromString(request.SerializeAsString()));
  EXPECT_TRUE(MessageDifferencer::Equals(request, binary));

  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(request, &json).ok());
  SubmitJobRequest from_json;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json, &from_json).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(request, from_json)) << json;
  EXPECT_EQ(from_json.model_case(), SubmitJobRequest::kModelPath);
}

TEST(ExecutorProtoTest, JobWithHistoryRoundTrips) {
  Job job;
  job.set_id("job-1");
  job.set_state(FAILED);
  job.set_reason("daemon restarted");
  StateChange* queued = job.add_history();
  queued->set_state(QUEUED);
  queued->mutable_time()->set_seconds(100);
  StateChange* failed = job.add_history();
  failed->set_state(FAILED);
  failed->set_reason("daemon restarted");
  job.mutable_progress()->set_iteration(3);
  job.mutable_progress()->set_loss(2.5);
  job.mutable_progress()->add_device_peak_bytes(1 << 20);
  Job back;
  ASSERT_TRUE(back.ParseFromString(job.SerializeAsString()));
  EXPECT_TRUE(MessageDifferencer::Equals(job, back));
  EXPECT_EQ(back.history(1).reason(), "daemon restarted");
}

// Answers GetDevices with two virtual devices.
class FakeExecutor final : public Executor::CallbackService {
  grpc::ServerUnaryReactor* GetDevices(grpc::CallbackServerContext* context,
                                       const GetDevicesRequest* request,
                                       GetDevicesResponse* response) override {
    for (uint32_t i = 0; i < 2; ++i) {
      Device* d = response->add_devices();
      d->set_index(i);
      d->set_kind("cpu");
      d->set_memory_bytes(512ull << 20);
    }
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

TEST(ExecutorProtoTest, GeneratedServiceServesOnLoopback) {
  FakeExecutor service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                     grpc::InsecureChannelCredentials());
  auto stub = Executor::NewStub(channel);
  {
    grpc::ClientContext context;
    GetDevicesResponse response;
    grpc::Status status =
        stub->GetDevices(&context, GetDevicesRequest(), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.devices_size(), 2);
    EXPECT_EQ(response.devices(1).memory_bytes(), 512ull << 20);
  }
  {
    grpc::ClientContext context;
    Job job;
    GetJobRequest request;
    request.set_job_id("nope");
    grpc::Status status = stub->GetJob(&context, request, &job);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  }
  server->Shutdown();
}

}  // namespace
}  // namespace harmony::proto
