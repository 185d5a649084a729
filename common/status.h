// Status helpers used across Harmony. Canonical codes only (STYLE.md §8).
//
// Thread-safety: stateless functions and macros.

#ifndef HARMONY_COMMON_STATUS_H_
#define HARMONY_COMMON_STATUS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace harmony::common {

// Returns `status` with "<context>: " in front of its message; OK stays OK.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

// The value at `key` in `map` (a std::map or unordered_map), or Internal
// "<what()> is missing": for internal lookups that fail only on a bug or a
// malformed input, so the failure says what was looked for and where instead
// of `map::at`. `what` is called only on a miss.
//   HARMONY_ASSIGN_OR_RETURN(const auto* refs, common::Lookup(routes, key, [&] {
//     return absl::StrCat("the route of task ", id); }));
template <typename Map, typename Describe>
absl::StatusOr<const typename Map::mapped_type*> Lookup(const Map& map,
                                                        const typename Map::key_type& key,
                                                        const Describe& what) {
  const auto it = map.find(key);
  if (it == map.end()) return absl::InternalError(std::string(what()) + " is missing");
  return &it->second;
}

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
