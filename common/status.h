// Status helpers used across Harmony. Canonical codes only (STYLE.md §8).
//
// Thread-safety: stateless functions and macros.

#ifndef HARMONY_COMMON_STATUS_H_
#define HARMONY_COMMON_STATUS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace harmony::common {

// Returns `status` with "<context>: " in front of its message; OK stays OK.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace harmony::common

#define HARMONY_STATUS_CONCAT_INNER_(a, b) a##b
#define HARMONY_STATUS_CONCAT_(a, b) HARMONY_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define HARMONY_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status harmony_status_ = (expr);           \
    if (!harmony_status_.ok()) return harmony_status_; \
  } while (false)

// `lhs` = the value of `rexpr` (an absl::StatusOr<T>), or returns its error.
//   HARMONY_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
#define HARMONY_ASSIGN_OR_RETURN(lhs, rexpr)                              \
  HARMONY_ASSIGN_OR_RETURN_IMPL_(                                         \
      HARMONY_STATUS_CONCAT_(harmony_statusor_, __LINE__), lhs, rexpr)

#define HARMONY_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();   \
  lhs = std::move(statusor).value()

#endif  // HARMONY_COMMON_STATUS_H_
