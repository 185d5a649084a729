// Job records round-trip through JSON exactly; the store writes and reads
// them, logs and plans in a real directory, and skips a damaged record.

#include "executor/jobs/job_store.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "common/files.h"
#include "gtest/gtest.h"

namespace harmony::executor {
namespace {

JobRecord Example() {
  JobRecord r;
  r.id = "job-7";
  r.name = "gpt";
  r.submission_id = "s-1";
  r.state = JobState::kFailed;
  r.reason = "out of memory";
  r.submitted_at = absl::FromUnixNanos(1234567890123456789);
  r.history = {{JobState::kQueued, r.submitted_at, "queued"},
               {JobState::kFailed, r.submitted_at + absl::Seconds(3), "out of memory"}};
  r.model_sha256 = "ab";
  r.model_path = "/m.pt";
  r.data_path = "/d.pt";
  r.iterations = 10;
  r.optimizer.kind = optim::OptimizerKind::kAdamW;
  r.optimizer.learning_rate = 0.003;
  r.seed = 5;
  r.num_devices = 2;
  r.device_memory_bytes = 1 << 20;
  r.host_memory_bytes = 3 << 20;
  r.mode = "vDP";
  r.devices = {0, 1};
  JobProgress p;
  p.iteration = 4;
  p.iterations = 10;
  p.loss = 2.5;
  p.device_peak_bytes = {100, 200};
  p.time = r.submitted_at + absl::Seconds(2);
  r.progress = p;
  return r;
}

TEST(JobStoreTest, RecordsRoundTrip) {
  const JobRecord r = Example();
  auto back = JobRecordFromJson(JobRecordToJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(JobRecordToJson(*back), JobRecordToJson(r));
  EXPECT_EQ(back->history[1].time, r.history[1].time);
  EXPECT_EQ(back->optimizer.kind, optim::OptimizerKind::kAdamW);
  EXPECT_EQ(back->progress->device_peak_bytes, (std::vector<uint64_t>{100, 200}));
  EXPECT_EQ(JobRecordFromJson("{").status().code(), absl::StatusCode::kInvalidArgument);
  auto missing = JobRecordFromJson(R"({"id": "job-1"})");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "name")) << missing.status();
}

TEST(JobStoreTest, SavesLoadsAndSkipsDamagedRecords) {
  const std::string dir = ::testing::TempDir() + "/store";
  auto store = JobStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  JobRecord a = Example();
  JobRecord b = Example();
  b.id = "job-12";
  ASSERT_TRUE(store->Save(b).ok());
  ASSERT_TRUE(store->Save(a).ok());
  ASSERT_TRUE(common::WriteFileAtomically(dir + "/jobs/job-9.json", "{\"id\": 3").ok());
  std::vector<std::string> problems;
  auto records = store->LoadAll(&problems);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].id, "job-7");  // Numeric order, not text order.
  EXPECT_EQ(records[1].id, "job-12");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(absl::StrContains(problems[0], "job-9.json")) << problems[0];

  EXPECT_TRUE(store->ReadLog("job-7")->empty());
  ASSERT_TRUE(store->AppendLog("job-7", "one").ok());
  ASSERT_TRUE(store->AppendLog("job-7", "two").ok());
  EXPECT_EQ(*store->ReadLog("job-7"), (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(store->LoadPlan("job-7").status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(common::WriteFileAtomically(::testing::TempDir() + "/plainfile", "x").ok());
  EXPECT_FALSE(JobStore::Open(::testing::TempDir() + "/plainfile").ok());
}

}  // namespace
}  // namespace harmony::executor
