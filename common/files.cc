#include "common/files.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace harmony::common {
namespace {

// Closes a file descriptor when it goes out of scope.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now and reports the error close() gives (deferred write errors).
  int Close() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

struct EvpMdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

// Incremental SHA-256 over OpenSSL's EVP interface.
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) {
    EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr);
  }
  void Update(const void* data, size_t size) {
    EVP_DigestUpdate(ctx_.get(), data, size);
  }
  std::string Finish() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    EVP_DigestFinal_ex(ctx_.get(), digest, &size);
    return std::string(reinterpret_cast<char*>(digest), size);
  }

 private:
  std::unique_ptr<EVP_MD_CTX, EvpMdCtxDeleter> ctx_;
};

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return absl::ErrnoToStatus(errno, path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return absl::ErrnoToStatus(errno, path);
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is a directory, expected a file"));
  }
  std::string contents;
  contents.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  while (true) {
    ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("reading ", path));
    }
    if (n == 0) break;
    contents.append(buffer, static_cast<size_t>(n));
  }
  return contents;
}

namespace {

// Makes what was written to `tmp` durable and renames it over `path`
// (durably too); removes `tmp` on failure.
absl::Status CommitFile(const std::string& tmp, const std::string& path) {
  {
    ScopedFd fd(::open(tmp.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0 || ::fsync(fd.get()) != 0 || fd.Close() != 0) {
      absl::Status error = absl::ErrnoToStatus(errno, absl::StrCat("writing ", tmp));
      ::unlink(tmp.c_str());
      return error;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status error = absl::ErrnoToStatus(
        errno, absl::StrCat("renaming ", tmp, " to ", path));
    ::unlink(tmp.c_str());
    return error;
  }
  // Make the rename itself durable.
  std::string dir = DirName(path);
  ScopedFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() >= 0) ::fsync(dir_fd.get());
  return absl::OkStatus();
}

std::string TmpBeside(const std::string& path) {
  return absl::StrCat(path, ".tmp.", ::getpid());
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents) {
  return WriteFileAtomicallyWith(path, [&](const std::string& tmp) -> absl::Status {
    ScopedFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) return absl::ErrnoToStatus(errno, tmp);
    const char* data = contents.data();
    size_t left = contents.size();
    while (left > 0) {
      ssize_t n = ::write(fd.get(), data, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        return absl::ErrnoToStatus(errno, absl::StrCat("writing ", tmp));
      }
      data += n;
      left -= static_cast<size_t>(n);
    }
    if (fd.Close() != 0) return absl::ErrnoToStatus(errno, absl::StrCat("writing ", tmp));
    return absl::OkStatus();
  });
}

absl::Status WriteFileAtomicallyWith(
    const std::string& path,
    const std::function<absl::Status(const std::string& tmp)>& write) {
  const std::string tmp = TmpBeside(path);
  absl::Status written = write(tmp);
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  return CommitFile(tmp, path);
}

std::string Sha256Bytes(absl::string_view data) {
  Sha256 sha;
  sha.Update(data.data(), data.size());
  return sha.Finish();
}

std::string Sha256Hex(absl::string_view data) {
  return absl::BytesToHexString(Sha256Bytes(data));
}

absl::StatusOr<std::string> Sha256OfFile(const std::string& path) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return absl::ErrnoToStatus(errno, path);
  Sha256 sha;
  std::vector<char> buffer(1 << 20);
  while (true) {
    ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("reading ", path));
    }
    if (n == 0) break;
    sha.Update(buffer.data(), static_cast<size_t>(n));
  }
  return absl::BytesToHexString(sha.Finish());
}

}  // namespace harmony::common
