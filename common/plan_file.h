// Reading and writing plan files.
//
// Binary form (`plan.pb`): a proto::PlanFile, i.e. the serialized proto::Plan
// with a magic number and its SHA-256, so truncation and corruption are
// detected rather than half-read. JSON form (`plan.json`): the proto::Plan in
// protobuf's JSON mapping, for people and scripts. Readers accept either.
//
// These functions deal in the wire type only; turning a proto::Plan into the
// validated domain plan is the job of the planner/executor edge.
//
// Errors: a missing or unreadable file follows errno (NotFound, ...); a file
// that is not a well-formed plan is InvalidArgument naming the file and what
// is wrong; a plan of a newer schema is FailedPrecondition.
//
// Thread-safety: stateless functions.

#ifndef HARMONY_COMMON_PLAN_FILE_H_
#define HARMONY_COMMON_PLAN_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/device_spec.h"
#include "proto/plan.pb.h"

namespace harmony::common {

// The plan schema this build reads and writes (proto::Plan.schema_version).
inline constexpr uint32_t kPlanSchemaVersion = 1;

// "HRMY" read as a little-endian fixed32.
inline constexpr uint32_t kPlanFileMagic = 0x594D5248;

// The binary file form of `plan`.
std::string SerializePlanFile(const proto::Plan& plan);

// `plan` in protobuf's JSON mapping (snake_case names, indented).
absl::StatusOr<std::string> PlanToJson(const proto::Plan& plan);

// Parses plan bytes in either form; `source` names them in errors (a path,
// or "submitted plan").
absl::StatusOr<proto::Plan> ParsePlan(absl::string_view bytes,
                                      absl::string_view source);

// Atomic writes (see WriteFileAtomically).
absl::Status WritePlanFile(const std::string& path, const proto::Plan& plan);
absl::Status WritePlanJson(const std::string& path, const proto::Plan& plan);

absl::StatusOr<proto::Plan> ReadPlanFile(const std::string& path);

// The devices `plan` was made for, for a run that names none: virtual CPU
// devices of the plan's count and memory. FailedPrecondition for a plan
// profiled on CUDA (partitions or whole GPUs: the user says which, with
// the command line to type); InvalidArgument when the plan names no
// devices or an unknown kind.
absl::StatusOr<DeviceSpec> PlannedDevices(const proto::Plan& plan);

}  // namespace harmony::common

#endif  // HARMONY_COMMON_PLAN_FILE_H_
