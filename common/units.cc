#include "common/units.h"

#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace harmony::common {
namespace {

struct Unit {
  absl::string_view suffix;  // Lower case.
  double factor;
};

// Longest suffixes first so that "kib" is not read as "b".
constexpr Unit kSizeUnits[] = {
    {"kib", 1024.0},
    {"mib", 1024.0 * 1024},
    {"gib", 1024.0 * 1024 * 1024},
    {"tib", 1024.0 * 1024 * 1024 * 1024},
    {"kb", 1e3},
    {"mb", 1e6},
    {"gb", 1e9},
    {"tb", 1e12},
    {"b", 1.0},
};

absl::Status SizeError(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid size \"", text, "\": ", why,
      " (expected a number and a unit such as 512MB, 1.5GiB or 4096B)"));
}

// Parses `text` as a number with an optional size unit, in bytes.
absl::StatusOr<double> ParseSizeValue(absl::string_view original,
                                      absl::string_view text) {
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  absl::string_view rest = lower;
  double factor = 1.0;
  for (const Unit& unit : kSizeUnits) {
    if (absl::ConsumeSuffix(&rest, unit.suffix)) {
      factor = unit.factor;
      break;
    }
  }
  rest = absl::StripAsciiWhitespace(rest);
  if (rest.empty()) return SizeError(original, "no number");
  double value = 0;
  if (!absl::SimpleAtod(rest, &value) || !std::isfinite(value)) {
    return SizeError(original, absl::StrCat("\"", rest, "\" is not a number"));
  }
  if (value < 0) return SizeError(original, "negative");
  return value * factor;
}

}  // namespace

absl::StatusOr<uint64_t> ParseBytes(absl::string_view text) {
  absl::StatusOr<double> bytes = ParseSizeValue(text, text);
  if (!bytes.ok()) return bytes.status();
  // 2^64 is exactly representable; anything at or above it overflows.
  if (*bytes >= 18446744073709551616.0) return SizeError(text, "too large");
  return static_cast<uint64_t>(std::llround(*bytes));
}

absl::StatusOr<double> ParseBandwidth(absl::string_view text) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  if (!absl::ConsumeSuffix(&rest, "/s") && !absl::ConsumeSuffix(&rest, "/S")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid bandwidth \"", text,
        "\": expected a size per second such as 12GB/s or 200MiB/s"));
  }
  absl::StatusOr<double> bytes = ParseSizeValue(text, rest);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid bandwidth \"", text,
        "\": expected a size per second such as 12GB/s or 200MiB/s"));
  }
  if (*bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid bandwidth \"", text, "\": must be positive"));
  }
  return *bytes;
}

absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text) {
  absl::Duration duration;
  std::string trimmed(absl::StripAsciiWhitespace(text));
  if (trimmed.empty() || !absl::ParseDuration(trimmed, &duration) ||
      duration == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid duration \"", text,
                     "\": expected a number and a unit such as 250ms, 1.5s, "
                     "2m or 1h"));
  }
  if (duration < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid duration \"", text, "\": negative"));
  }
  return duration;
}

std::string FormatBytes(uint64_t bytes) {
  constexpr absl::string_view kNames[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < kKiB) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kNames)) {
    value /= 1024.0;
    ++unit;
  }
  return absl::StrFormat("%.2f %s", value, kNames[unit]);
}

std::string FormatBandwidth(double bytes_per_s) {
  constexpr absl::string_view kNames[] = {"B/s", "KB/s", "MB/s", "GB/s",
                                          "TB/s"};
  double value = bytes_per_s;
  size_t unit = 0;
  while (value >= 1000.0 && unit + 1 < std::size(kNames)) {
    value /= 1000.0;
    ++unit;
  }
  return absl::StrFormat("%.2f %s", value, kNames[unit]);
}

std::string FormatTimeSpan(absl::Duration duration) {
  double seconds = absl::ToDoubleSeconds(duration);
  if (std::fabs(seconds) >= 1.0) return absl::StrFormat("%.3f s", seconds);
  if (std::fabs(seconds) >= 1e-3) {
    return absl::StrFormat("%.3f ms", seconds * 1e3);
  }
  return absl::StrFormat("%.3f us", seconds * 1e6);
}

}  // namespace harmony::common
