#include "common/device_spec.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/units.h"

namespace harmony::common {
namespace {

absl::Status Invalid(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid devices \"", text, "\": ", why,
      " (expected cpu:NxSIZE such as cpu:2x512MiB, or cuda, cuda:N or cuda:NxSIZE)"));
}

}  // namespace

std::string DeviceSpec::ToString() const {
  if (kind == Kind::kCuda) {
    if (capacity > 0) return absl::StrCat("cuda:", count, "x", FormatBytes(capacity));
    return count == 0 ? "cuda" : absl::StrCat("cuda:", count);
  }
  return absl::StrCat("cpu:", count, "x", FormatBytes(capacity));
}

absl::StatusOr<DeviceSpec> ParseDeviceSpec(absl::string_view text) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  DeviceSpec spec;
  const bool cuda = absl::ConsumePrefix(&rest, "cuda");
  if (cuda) {
    spec.kind = DeviceSpec::Kind::kCuda;
    if (rest.empty()) return spec;
    if (!absl::ConsumePrefix(&rest, ":")) return Invalid(text, "expected cuda, cuda:N or cuda:NxSIZE");
    if (rest.find('x') == absl::string_view::npos) {
      int count = 0;
      if (!absl::SimpleAtoi(rest, &count) || count < 1) {
        return Invalid(text, "the CUDA device count must be a positive number");
      }
      spec.count = count;
      return spec;
    }
  } else if (!absl::ConsumePrefix(&rest, "cpu:")) {
    return Invalid(text, "unknown device kind");
  }
  const size_t x = rest.find('x');
  if (x == absl::string_view::npos) {
    return Invalid(text, cuda ? "missing the size (cuda:NxSIZE)" : "missing the size (cpu:NxSIZE)");
  }
  int count = 0;
  if (!absl::SimpleAtoi(rest.substr(0, x), &count) || count < 1 || count > 1024) {
    return Invalid(text, "the device count must be between 1 and 1024");
  }
  absl::StatusOr<uint64_t> capacity = ParseBytes(rest.substr(x + 1));
  if (!capacity.ok()) return Invalid(text, capacity.status().message());
  if (*capacity == 0) return Invalid(text, "the device size must be positive");
  spec.count = count;
  spec.capacity = *capacity;
  return spec;
}

absl::Status CudaBuildNeeded(const DeviceSpec& spec, absl::string_view does) {
  return absl::FailedPreconditionError(absl::StrCat(
      "this build ", does, " virtual CPU devices only (cpu:NxSIZE); ", spec.ToString(),
      " needs a CUDA build (scripts/gpu-check.sh builds one on a GPU machine)"));
}

}  // namespace harmony::common
