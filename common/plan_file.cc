#include "common/plan_file.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status.h"
#include "common/units.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/json_util.h"

namespace harmony::common {
namespace {

absl::Status Invalid(absl::string_view source, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": not a valid Harmony plan: ", why));
}

absl::Status CheckVersion(const proto::Plan& plan, absl::string_view source) {
  if (plan.schema_version() == 0) {
    return Invalid(source, "schema_version is missing");
  }
  if (plan.schema_version() > kPlanSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        source, ": plan schema version ", plan.schema_version(),
        " is newer than this build supports (", kPlanSchemaVersion,
        "); upgrade Harmony or re-run harmony-plan with this version"));
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::Plan> ParseJson(absl::string_view bytes,
                                      absl::string_view source) {
  proto::Plan plan;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(bytes.data(), bytes.size()), &plan,
      options);
  if (!status.ok()) {
    return Invalid(source, absl::StrCat("JSON: ", status.message().as_string()));
  }
  return plan;
}

absl::StatusOr<proto::Plan> ParseBinary(absl::string_view bytes,
                                        absl::string_view source) {
  proto::PlanFile file;
  if (!file.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Invalid(source, absl::StrCat("the file (", bytes.size(),
                                        " bytes) is truncated or corrupt"));
  }
  if (file.magic() != kPlanFileMagic) {
    return Invalid(source, "wrong magic number (is it a plan file?)");
  }
  if (file.plan_sha256().empty()) {
    return Invalid(source, "the checksum is missing (file truncated?)");
  }
  if (Sha256Bytes(file.plan()) != file.plan_sha256()) {
    return Invalid(source,
                   "checksum mismatch: the file is corrupt or truncated");
  }
  proto::Plan plan;
  if (!plan.ParseFromString(file.plan())) {
    return Invalid(source, "the plan message does not parse");
  }
  return plan;
}

}  // namespace

std::string SerializePlanFile(const proto::Plan& plan) {
  proto::PlanFile file;
  file.set_magic(kPlanFileMagic);
  // Deterministic so that the same plan always gives the same bytes.
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    plan.SerializeToCodedStream(&coded);
  }
  file.set_plan_sha256(Sha256Bytes(bytes));
  file.set_plan(std::move(bytes));
  return file.SerializeAsString();
}

absl::StatusOr<std::string> PlanToJson(const proto::Plan& plan) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  auto status =
      google::protobuf::util::MessageToJsonString(plan, &json, options);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat(
        "converting the plan to JSON: ", status.message().as_string()));
  }
  return json;
}

absl::StatusOr<proto::Plan> ParsePlan(absl::string_view bytes,
                                      absl::string_view source) {
  absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(bytes);
  if (trimmed.empty()) return Invalid(source, "the file is empty");
  absl::StatusOr<proto::Plan> plan = trimmed.front() == '{'
                                         ? ParseJson(bytes, source)
                                         : ParseBinary(bytes, source);
  if (!plan.ok()) return plan.status();
  HARMONY_RETURN_IF_ERROR(CheckVersion(*plan, source));
  return plan;
}

absl::Status WritePlanFile(const std::string& path, const proto::Plan& plan) {
  return WriteFileAtomically(path, SerializePlanFile(plan));
}

absl::Status WritePlanJson(const std::string& path, const proto::Plan& plan) {
  HARMONY_ASSIGN_OR_RETURN(std::string json, PlanToJson(plan));
  return WriteFileAtomically(path, json);
}

absl::StatusOr<proto::Plan> ReadPlanFile(const std::string& path) {
  HARMONY_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  return ParsePlan(bytes, path);
}

namespace {

// `bytes` as a command line takes it, exactly: "11GiB", "1536KiB", "1000".
std::string SizeFlag(uint64_t bytes) {
  for (const auto& [unit, size] : {std::pair<const char*, uint64_t>{"GiB", 1ull << 30},
                                   {"MiB", 1ull << 20}, {"KiB", 1ull << 10}}) {
    if (bytes >= size && bytes % size == 0) return absl::StrCat(bytes / size, unit);
  }
  return absl::StrCat(bytes);
}

}  // namespace

absl::StatusOr<DeviceSpec> PlannedDevices(const proto::Plan& plan) {
  const uint32_t n = plan.config().num_devices();
  const uint64_t bytes = plan.config().device_memory_bytes();
  if (n < 1 || bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan names no devices (", n, " of ", FormatBytes(bytes), "): say --devices"));
  }
  const std::string& kind = plan.profile().device_kind();
  if (kind == "cuda") {
    return absl::FailedPreconditionError(absl::StrCat(
        "the plan was made for ", n, " CUDA device(s) of ", FormatBytes(bytes),
        ": say --devices cuda:", n, "x", SizeFlag(bytes),
        " (partitions of one GPU) or --devices cuda (whole GPUs)"));
  }
  if (!kind.empty() && kind != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat(
        "the plan's profile names device kind \"", kind,
        "\" (expected cpu or cuda): say --devices"));
  }
  DeviceSpec spec;
  spec.kind = DeviceSpec::Kind::kCpu;
  spec.count = static_cast<int>(n);
  spec.capacity = bytes;
  return spec;
}

}  // namespace harmony::common
