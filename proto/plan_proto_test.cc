// Round trips of the plan schema through its binary and JSON encodings.

#include <string>

#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/plan.pb.h"
#include "proto/testing/sample_plan.h"

namespace harmony::proto {
namespace {

using google::protobuf::util::MessageDifferencer;

TEST(PlanProtoTest, BinaryRoundTripKeepsEveryField) {
  Plan plan = testing::MakeSamplePlan();
  std::string bytes = plan.SerializeAsString();
  ASSERT_FALSE(bytes.empty());
  Plan back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  std::string diff;
  MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(plan, back)) << diff;
  // Spot-check values deep in the tree survived, not just the shape.
  EXPECT_EQ(back.model().decomposition().vlayers(3).parameters(1),
            "layers.3.bias");
  EXPECT_EQ(back.devices(1).tasks(0).transfers(1).kind(), GRADIENTS_OUT);
  EXPECT_DOUBLE_EQ(back.profile().vlayers(2).by_microbatch(1).backward_time_s(),
                   6e-4);
}

TEST(PlanProtoTest, JsonRoundTripKeepsEveryField) {
  Plan plan = testing::MakeSamplePlan();
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(plan, &json, print)
                  .ok());
  EXPECT_NE(json.find("\"schema_version\":1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"KEEP_RESIDENT\""), std::string::npos);
  Plan back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &back).ok());
  std::string diff;
  MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(plan, back)) << diff;
}

TEST(PlanProtoTest, JsonRejectsUnknownFields) {
  Plan back;
  auto status = google::protobuf::util::JsonStringToMessage(
      R"({"schema_version": 1, "no_such_field": 3})", &back);
  EXPECT_FALSE(status.ok());
}

TEST(PlanProtoTest, SerializedPlanIsCompact) {
  // The sample plan's profile and task graph fit in a few KiB; a regression
  // here means something is serialised far more verbosely than it should.
  EXPECT_LT(testing::MakeSamplePlan().ByteSizeLong(), 4096u);
}

}  // namespace
}  // namespace harmony::proto
