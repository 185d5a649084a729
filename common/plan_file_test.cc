#include "common/plan_file.h"

#include <string>

#include "common/device_spec.h"
#include "common/files.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/testing/sample_plan.h"

namespace harmony::common {
namespace {

using google::protobuf::util::MessageDifferencer;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

TEST(PlanFileTest, BinaryFileRoundTrip) {
  proto::Plan plan = proto::testing::MakeSamplePlan();
  std::string path = TempPath("plan.pb");
  ASSERT_TRUE(WritePlanFile(path, plan).ok());
  absl::StatusOr<proto::Plan> back = ReadPlanFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(MessageDifferencer::Equals(plan, *back));
}

TEST(PlanFileTest, JsonFileRoundTrip) {
  proto::Plan plan = proto::testing::MakeSamplePlan();
  std::string path = TempPath("plan.json");
  ASSERT_TRUE(WritePlanJson(path, plan).ok());
  absl::StatusOr<std::string> text = ReadFileToString(path);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("\"fused_loss\": true"), std::string::npos);
  absl::StatusOr<proto::Plan> back = ReadPlanFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(MessageDifferencer::Equals(plan, *back));
}

TEST(PlanFileTest, SerializationIsDeterministic) {
  proto::Plan plan = proto::testing::MakeSamplePlan();
  EXPECT_EQ(SerializePlanFile(plan), SerializePlanFile(plan));
}

TEST(PlanFileTest, EveryTruncationIsInvalidArgumentNamingTheFile) {
  std::string bytes = SerializePlanFile(proto::testing::MakeSamplePlan());
  std::string path = TempPath("truncated.pb");
  for (size_t length = 0; length < bytes.size(); ++length) {
    ASSERT_TRUE(WriteFileAtomically(path, bytes.substr(0, length)).ok());
    absl::StatusOr<proto::Plan> plan = ReadPlanFile(path);
    ASSERT_FALSE(plan.ok()) << "a plan cut to " << length << " of "
                            << bytes.size() << " bytes was accepted";
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument)
        << plan.status();
    EXPECT_NE(plan.status().message().find(path), absl::string_view::npos)
        << plan.status();
  }
}

TEST(PlanFileTest, EveryFlippedByteIsRejected) {
  std::string bytes = SerializePlanFile(proto::testing::MakeSamplePlan());
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string corrupt = bytes;
    corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
    absl::StatusOr<proto::Plan> plan = ParsePlan(corrupt, "corrupt.pb");
    ASSERT_FALSE(plan.ok()) << "a plan with byte " << i << " flipped parsed";
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find("corrupt.pb"),
              absl::string_view::npos);
  }
}

TEST(PlanFileTest, GarbageAndEmptyAreInvalidArgument) {
  for (const std::string& bytes :
       {std::string(), std::string("   \n"), std::string("hello world"),
        std::string("{ not json"), std::string("\x00\x01\x02\x03", 4)}) {
    absl::StatusOr<proto::Plan> plan = ParsePlan(bytes, "input.pb");
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument)
        << plan.status();
    EXPECT_NE(plan.status().message().find("input.pb"),
              absl::string_view::npos);
  }
}

TEST(PlanFileTest, JsonUnknownFieldIsNamed) {
  absl::StatusOr<proto::Plan> plan =
      ParsePlan(R"({"schema_version": 1, "devicez": []})", "typo.json");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("devicez"), absl::string_view::npos)
      << plan.status();
}

TEST(PlanFileTest, MissingOrNewerSchemaVersion) {
  proto::Plan plan = proto::testing::MakeSamplePlan();
  plan.set_schema_version(0);
  absl::StatusOr<proto::Plan> missing =
      ParsePlan(SerializePlanFile(plan), "old.pb");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);

  plan.set_schema_version(kPlanSchemaVersion + 1);
  absl::StatusOr<proto::Plan> newer =
      ParsePlan(SerializePlanFile(plan), "new.pb");
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(newer.status().message().find("schema version 2"),
            absl::string_view::npos)
      << newer.status();
}

TEST(PlanFileTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadPlanFile(TempPath("nope.pb")).status().code(),
            absl::StatusCode::kNotFound);
}

// A run that names no devices gets the plan's: virtual CPU devices of its
// count and memory; a CUDA plan asks which, with the flag to type.
TEST(PlanFileTest, PlannedDevicesAreThePlansOrAskForCuda) {
  proto::Plan plan = proto::testing::MakeSamplePlan();
  plan.mutable_config()->set_num_devices(3);
  plan.mutable_config()->set_device_memory_bytes(3ull << 20);
  plan.mutable_profile()->set_device_kind("cpu");
  absl::StatusOr<DeviceSpec> cpu = PlannedDevices(plan);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->kind, DeviceSpec::Kind::kCpu);
  EXPECT_EQ(cpu->count, 3);
  EXPECT_EQ(cpu->capacity, 3ull << 20);

  plan.mutable_config()->set_device_memory_bytes(11ull << 30);
  plan.mutable_profile()->set_device_kind("cuda");
  absl::StatusOr<DeviceSpec> cuda = PlannedDevices(plan);
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(cuda.status().message().find("3 CUDA device(s) of 11.00 GiB: say --devices "
                                         "cuda:3x11GiB (partitions of one GPU) or --devices cuda"),
            absl::string_view::npos)
      << cuda.status();
  // The flag it names parses to the plan's devices.
  absl::StatusOr<DeviceSpec> typed = ParseDeviceSpec("cuda:3x11GiB");
  ASSERT_TRUE(typed.ok()) << typed.status();
  EXPECT_EQ(typed->capacity, 11ull << 30);

  plan.mutable_profile()->set_device_kind("tpu");
  EXPECT_EQ(PlannedDevices(plan).status().code(), absl::StatusCode::kInvalidArgument);
  plan.mutable_config()->set_num_devices(0);
  EXPECT_EQ(PlannedDevices(plan).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace harmony::common
