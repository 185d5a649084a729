#include "executor/service/daemon_token.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status.h"

namespace harmony::executor {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Mode 0600, or 0640 owned by `group`.
absl::Status Protect(const std::string& path, const std::string& group) {
  if (!group.empty()) {
    struct group* g = getgrnam(group.c_str());
    if (g == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token-group ", group, ": no such group on this machine"));
    }
    if (chown(path.c_str(), static_cast<uid_t>(-1), g->gr_gid) != 0) {
      return Errno(absl::StrCat("giving ", path, " to group ", group));
    }
  }
  if (chmod(path.c_str(), group.empty() ? 0600 : 0640) != 0) {
    return Errno(absl::StrCat("setting the mode of ", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> LoadOrCreateToken(const std::string& state_dir,
                                              const std::string& group) {
  std::error_code error;
  std::filesystem::create_directories(state_dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make the state directory ", state_dir, ": ", error.message()));
  }
  const std::string path = TokenPathIn(state_dir);
  if (!std::filesystem::exists(path)) {
    std::string random(32, '\0');
    std::ifstream urandom("/dev/urandom", std::ios::binary);
    if (!urandom.read(random.data(), static_cast<std::streamsize>(random.size()))) {
      return absl::InternalError("cannot read /dev/urandom for the daemon's token");
    }
    const std::string token = absl::BytesToHexString(random);
    // Created with no permissions for others from the start.
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return Errno(absl::StrCat("creating ", path));
    const std::string line = token + "\n";
    const bool written = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    const bool synced = fsync(fd) == 0;
    close(fd);
    if (!written || !synced) return Errno(absl::StrCat("writing ", path));
  }
  HARMONY_RETURN_IF_ERROR(Protect(path, group));
  HARMONY_ASSIGN_OR_RETURN(std::string text, common::ReadFileToString(path));
  const std::string token(absl::StripAsciiWhitespace(text));
  if (token.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the token file ", path, " is empty: delete it and a new one is made"));
  }
  return token;
}

}  // namespace harmony::executor
