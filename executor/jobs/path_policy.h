// Which paths on the server a job may name (harmony-exec --allow-path): the
// daemon opens them with its own rights, not its caller's, so a request
// may only reach under the roots its operator allows.
//
// Thread-safety: immutable after Create; Check may be called from any
// thread.

#ifndef HARMONY_EXECUTOR_JOBS_PATH_POLICY_H_
#define HARMONY_EXECUTOR_JOBS_PATH_POLICY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace harmony::executor {

class PathPolicy {
 public:
  // `roots` (directories; "/" allows every path), or when empty the
  // daemon's working directory; and the state directory. Each is made
  // absolute and its symlinks resolved. InvalidArgument for a root that is
  // not a directory.
  static absl::StatusOr<PathPolicy> Create(const std::vector<std::string>& roots,
                                           const std::string& state_dir);

  // OK when `path` lies under a root once made absolute and its symlinks
  // (and "..") resolved; else PermissionDenied naming `flag`, the path and
  // the roots. An empty path is OK (not given).
  absl::Status Check(const std::string& flag, const std::string& path) const;

  const std::vector<std::string>& roots() const { return roots_; }

 private:
  std::vector<std::string> roots_;  // Canonical, without a trailing '/'.
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_JOBS_PATH_POLICY_H_
