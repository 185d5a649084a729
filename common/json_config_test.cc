// Settings files: values of each type, sizes, relative paths, and errors
// that name the key (wrong type, unknown key, not an object).

#include "common/json_config.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace harmony::common {
namespace {

TEST(JsonConfigTest, ReadsEachTypeAndResolvesPaths) {
  auto config = JsonConfig::Parse(R"({"name": "x", "iterations": 10, "lr": 0.5, "wait": true,
                                      "memory": "2MiB", "bytes": 7, "data": "d/data.pt",
                                      "model": "/abs/m.pt"})",
                                  "job.json", "/etc/jobs");
  ASSERT_TRUE(config.ok()) << config.status();
  std::string name, data, model;
  int64_t iterations = 0;
  double lr = 0;
  bool wait = false;
  uint64_t memory = 0, bytes = 0, absent = 42;
  config->Get("name", &name);
  config->Get("iterations", &iterations);
  config->Get("lr", &lr);
  config->Get("wait", &wait);
  config->GetBytes("memory", &memory);
  config->GetBytes("bytes", &bytes);
  config->GetPath("data", &data);
  config->GetPath("model", &model);
  config->Get("absent", &absent);
  EXPECT_TRUE(config->Finish().ok()) << config->Finish();
  EXPECT_EQ(name, "x");
  EXPECT_EQ(iterations, 10);
  EXPECT_EQ(lr, 0.5);
  EXPECT_TRUE(wait);
  EXPECT_EQ(memory, 2u << 20);
  EXPECT_EQ(bytes, 7u);
  EXPECT_EQ(data, "/etc/jobs/d/data.pt");
  EXPECT_EQ(model, "/abs/m.pt");
  EXPECT_EQ(absent, 42u);
}

TEST(JsonConfigTest, ErrorsNameTheKey) {
  auto wrong = JsonConfig::Parse(R"({"iterations": "ten"})", "job.json", ".");
  int64_t iterations = 0;
  wrong->Get("iterations", &iterations);
  EXPECT_EQ(wrong->Finish().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(wrong->Finish().message(),
                                "job.json: key \"iterations\" must be an integer"))
      << wrong->Finish();

  auto negative = JsonConfig::Parse(R"({"max_queued": -1, "n": 1.5})", "d.json", ".");
  uint64_t max_queued = 0;
  int n = 0;
  negative->Get("max_queued", &max_queued);
  EXPECT_TRUE(absl::StrContains(negative->Finish().message(), "non-negative integer"));
  negative->Get("n", &n);

  auto unknown = JsonConfig::Parse(R"({"iterations": 3, "iters": 4})", "job.json", ".");
  unknown->Get("iterations", &iterations);
  EXPECT_TRUE(absl::StrContains(unknown->Finish().message(), "unknown key \"iters\""))
      << unknown->Finish();

  EXPECT_EQ(JsonConfig::Parse("[1]", "a.json", ".").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(JsonConfig::Parse("{", "a.json", ".").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(JsonConfig::Load("/no/such/file.json").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace harmony::common
