#include "common/units.h"

#include "gtest/gtest.h"

namespace harmony::common {
namespace {

TEST(ParseBytesTest, AcceptsBinaryAndDecimalUnits) {
  EXPECT_EQ(*ParseBytes("11GiB"), 11ull * 1024 * 1024 * 1024);
  EXPECT_EQ(*ParseBytes("512MB"), 512'000'000ull);
  EXPECT_EQ(*ParseBytes("512MiB"), 512ull << 20);
  EXPECT_EQ(*ParseBytes("4KiB"), 4096u);
  EXPECT_EQ(*ParseBytes("1kb"), 1000u);
  EXPECT_EQ(*ParseBytes("2TB"), 2'000'000'000'000ull);
  EXPECT_EQ(*ParseBytes("1.5GiB"), 1536ull << 20);
  EXPECT_EQ(*ParseBytes("4096"), 4096u);
  EXPECT_EQ(*ParseBytes("100B"), 100u);
  EXPECT_EQ(*ParseBytes(" 8 MiB "), 8ull << 20);
  EXPECT_EQ(*ParseBytes("0"), 0u);
}

TEST(ParseBytesTest, ErrorsQuoteTheText) {
  for (const char* bad : {"", "GiB", "12XB", "-1GiB", "abc", "1.2.3MB",
                          "99999999999TiB", "nanMB"}) {
    absl::StatusOr<uint64_t> parsed = ParseBytes(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(std::string("\"") + bad + "\""),
              absl::string_view::npos)
        << parsed.status();
  }
}

TEST(ParseBandwidthTest, AcceptsSizePerSecond) {
  EXPECT_DOUBLE_EQ(*ParseBandwidth("12GB/s"), 12e9);
  EXPECT_DOUBLE_EQ(*ParseBandwidth("200MB/s"), 200e6);
  EXPECT_DOUBLE_EQ(*ParseBandwidth("1GiB/s"), 1024.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(*ParseBandwidth("11.5GiB/s"), 11.5 * 1024 * 1024 * 1024);
}

TEST(ParseBandwidthTest, RejectsMissingRateAndZero) {
  for (const char* bad : {"12GB", "0GB/s", "/s", "fast/s", "-3MB/s"}) {
    absl::StatusOr<double> parsed = ParseBandwidth(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(bad), absl::string_view::npos)
        << parsed.status();
  }
}

TEST(ParseDurationTest, AcceptsCommonUnits) {
  EXPECT_EQ(*ParseDuration("250ms"), absl::Milliseconds(250));
  EXPECT_EQ(*ParseDuration("1.5s"), absl::Milliseconds(1500));
  EXPECT_EQ(*ParseDuration("2m"), absl::Minutes(2));
  EXPECT_EQ(*ParseDuration("10us"), absl::Microseconds(10));
}

TEST(ParseDurationTest, ErrorsQuoteTheText) {
  for (const char* bad : {"", "250", "soon", "-1s", "inf"}) {
    absl::StatusOr<absl::Duration> parsed = ParseDuration(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(std::string("\"") + bad + "\""),
              absl::string_view::npos)
        << parsed.status();
  }
}

TEST(FormatTest, PicksReadableUnits) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(11ull << 30), "11.00 GiB");
  EXPECT_EQ(FormatBandwidth(12e9), "12.00 GB/s");
  EXPECT_EQ(FormatBandwidth(950), "950.00 B/s");
  EXPECT_EQ(FormatTimeSpan(absl::Milliseconds(1500)), "1.500 s");
  EXPECT_EQ(FormatTimeSpan(absl::Microseconds(2500)), "2.500 ms");
  EXPECT_EQ(FormatTimeSpan(absl::Nanoseconds(1500)), "1.500 us");
}

TEST(FormatTest, ParseOfFormatRoundTrips) {
  for (uint64_t bytes : {1ull, 1023ull, 4096ull, 3ull << 30}) {
    absl::StatusOr<uint64_t> back =
        ParseBytes(FormatBytes(bytes).erase(FormatBytes(bytes).find(' '), 1));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, bytes);
  }
}

}  // namespace
}  // namespace harmony::common
