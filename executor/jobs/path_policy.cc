#include "executor/jobs/path_policy.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace harmony::executor {
namespace {

// Absolute, "..", "." and symlinks of the existing part resolved.
std::string Resolved(const std::string& path) {
  std::error_code error;
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path),
                                                              error);
  if (error) p = std::filesystem::absolute(path).lexically_normal();
  std::string out = p.string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace

absl::StatusOr<PathPolicy> PathPolicy::Create(const std::vector<std::string>& roots,
                                              const std::string& state_dir) {
  PathPolicy policy;
  std::vector<std::string> given = roots;
  if (given.empty()) given.push_back(std::filesystem::current_path().string());
  // Its own files (a job's checkpoints to resume from) always.
  if (!state_dir.empty()) given.push_back(state_dir);
  for (const std::string& root : roots) {
    std::error_code error;
    if (!std::filesystem::is_directory(root, error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--allow-path ", root, ": not a directory on this server"));
    }
  }
  for (const std::string& root : given) policy.roots_.push_back(Resolved(root));
  return policy;
}

absl::Status PathPolicy::Check(const std::string& flag, const std::string& path) const {
  if (path.empty()) return absl::OkStatus();
  const std::string p = Resolved(path);
  for (const std::string& root : roots_) {
    const bool under = p.size() > root.size() && p.compare(0, root.size(), root) == 0 &&
                       p[root.size()] == '/';
    if (root == "/" || p == root || under) {
      return absl::OkStatus();
    }
  }
  return absl::PermissionDeniedError(absl::StrCat(
      flag, " ", path, " is outside the paths this daemon lets jobs name (",
      absl::StrJoin(roots_, ", "), "): put it under one of them, send the model's bytes "
      "(--upload-model), or ask the daemon's operator for harmony-exec --allow-path DIR"));
}

}  // namespace harmony::executor
