#include "executor/runtime/tensorboard.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/files.h"
#include "gtest/gtest.h"
#include "proto/tensorboard.pb.h"

namespace harmony::executor {
namespace {

TEST(TensorBoardTest, Crc32cOfTheCheckString) {
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);  // The standard check value.
  EXPECT_EQ(Crc32c(""), 0u);
  const uint32_t crc = Crc32c("abc");
  EXPECT_EQ(MaskedCrc32c("abc"), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

// Every record's framing and CRCs, and its Event.
std::vector<tensorboard::Event> ReadEvents(const std::string& path) {
  std::vector<tensorboard::Event> out;
  absl::StatusOr<std::string> bytes = common::ReadFileToString(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok()) return out;
  const std::string& b = *bytes;
  size_t at = 0;
  while (at < b.size()) {
    EXPECT_GE(b.size() - at, 16u);
    uint64_t length = 0;
    std::memcpy(&length, b.data() + at, 8);
    uint32_t length_crc = 0, payload_crc = 0;
    std::memcpy(&length_crc, b.data() + at + 8, 4);
    EXPECT_EQ(length_crc, MaskedCrc32c(absl::string_view(b.data() + at, 8)));
    const std::string payload = b.substr(at + 12, length);
    std::memcpy(&payload_crc, b.data() + at + 12 + length, 4);
    EXPECT_EQ(payload_crc, MaskedCrc32c(payload));
    tensorboard::Event e;
    EXPECT_TRUE(e.ParseFromString(payload));
    out.push_back(e);
    at += 16 + length;
  }
  return out;
}

TEST(TensorBoardTest, WritesAVersionThenScalarsPerIteration) {
  const std::string dir = ::testing::TempDir() + "/tb/run";
  auto w = EventWriter::Create(dir);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)->path().rfind(dir + "/events.out.tfevents.", 0), 0u) << (*w)->path();
  IterationMetrics m;
  m.iteration = 4;
  m.loss = 2.5;
  m.learning_rate = 0.001;
  m.samples_per_s = 100;
  m.bytes.weights_in = 1000;
  m.bytes.gradients_out = 24;
  m.device_peak_bytes = {7, 9};
  m.swap_wait_s = 0.25;
  m.peer_wait_s = 0.125;
  m.clipping = true;
  m.grad_norm = 1.5;
  m.evaluated = true;
  m.eval.loss = 2.75;
  ASSERT_TRUE((*w)->AddIteration(m).ok());
  const std::vector<tensorboard::Event> events = ReadEvents((*w)->path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_EQ(events[1].step(), 5);
  std::map<std::string, float> got;
  for (const auto& v : events[1].summary().value()) got[v.tag()] = v.simple_value();
  const std::map<std::string, float> want = {
      {"train/loss", 2.5f},        {"train/lr", 0.001f},         {"train/samples_per_s", 100.f},
      {"swap/host_link_bytes", 1024.f}, {"device/peak_bytes", 9.f}, {"swap/wait_s", 0.25f},
      {"swap/peer_wait_s", 0.125f}, {"train/grad_norm", 1.5f},   {"eval/loss", 2.75f}};
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace harmony::executor
