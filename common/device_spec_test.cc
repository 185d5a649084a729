#include "common/device_spec.h"

#include "gtest/gtest.h"

namespace harmony::common {
namespace {

TEST(DeviceSpecTest, VirtualCpuDevices) {
  absl::StatusOr<DeviceSpec> spec = ParseDeviceSpec("cpu:2x512MiB");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->kind, DeviceSpec::Kind::kCpu);
  EXPECT_EQ(spec->count, 2);
  EXPECT_EQ(spec->capacity, 512ull << 20);
  EXPECT_EQ(spec->ToString(), "cpu:2x512.00 MiB");
  EXPECT_EQ(ParseDeviceSpec("cpu:4x2GiB")->capacity, 2ull << 30);
}

TEST(DeviceSpecTest, Cuda) {
  EXPECT_EQ(ParseDeviceSpec("cuda")->kind, DeviceSpec::Kind::kCuda);
  EXPECT_EQ(ParseDeviceSpec("cuda")->count, 0);
  EXPECT_EQ(ParseDeviceSpec("cuda:2")->count, 2);
  EXPECT_EQ(ParseDeviceSpec("cuda:2")->capacity, 0u);
  // Partitions of the GPUs, each with its own cap.
  absl::StatusOr<DeviceSpec> parts = ParseDeviceSpec("cuda:4x10GiB");
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->kind, DeviceSpec::Kind::kCuda);
  EXPECT_EQ(parts->count, 4);
  EXPECT_EQ(parts->capacity, 10ull << 30);
  EXPECT_EQ(parts->ToString(), "cuda:4x10.00 GiB");
}

TEST(DeviceSpecTest, ErrorsQuoteTheText) {
  for (const char* bad : {"", "gpu", "cpu", "cpu:2", "cpu:0x1GiB", "cpu:2xlots",
                          "cpu:2x0", "cuda:0", "cuda:x", "cpu:-1x1GiB",
                          "cuda2", "cuda:2x", "cuda:0x1GiB", "cuda:2x0"}) {
    absl::StatusOr<DeviceSpec> spec = ParseDeviceSpec(bad);
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(spec.status().message().find(std::string("\"") + bad + "\""),
              absl::string_view::npos)
        << spec.status();
  }
}

}  // namespace
}  // namespace harmony::common
