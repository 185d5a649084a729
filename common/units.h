// Parsing and printing of sizes, bandwidths and durations as people write
// them on command lines and in configs: "11GiB", "512MB", "12GB/s", "250ms".
//
// Sizes: a non-negative number (fractions allowed) and a unit, case-
// insensitive: B, KB/MB/GB/TB (powers of 1000), KiB/MiB/GiB/TiB (powers of
// 1024). A bare number is bytes. Bandwidths: a size followed by "/s".
// Durations: a number and ns, us, ms, s, m or h (absl::ParseDuration).
// Errors are InvalidArgument and quote the text that was given.
//
// Thread-safety: stateless functions.

#ifndef HARMONY_COMMON_UNITS_H_
#define HARMONY_COMMON_UNITS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace harmony::common {

inline constexpr uint64_t kKiB = uint64_t{1} << 10;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// "11GiB" -> 11811160064. Fractions are rounded to the nearest byte.
absl::StatusOr<uint64_t> ParseBytes(absl::string_view text);

// "12GB/s" -> 1.2e10 bytes per second. Must be positive.
absl::StatusOr<double> ParseBandwidth(absl::string_view text);

// "250ms" -> absl::Milliseconds(250). Must not be negative.
absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text);

// 1536 -> "1.50 KiB"; below 1 KiB, "512 B".
std::string FormatBytes(uint64_t bytes);

// 1.2e10 -> "12.00 GB/s" (decimal units, as link speeds are quoted).
std::string FormatBandwidth(double bytes_per_s);

// absl::Milliseconds(1500) -> "1.500 s"; below a second in ms, below a
// millisecond in us.
std::string FormatTimeSpan(absl::Duration duration);

}  // namespace harmony::common

#endif  // HARMONY_COMMON_UNITS_H_
