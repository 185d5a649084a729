// A harmony-exec daemon process started by a test on loopback. Its output
// is read by a thread (so the pipe never fills); Start returns once it says
// where it listens, or has exited.
//
// Thread-safety: output() may be called from any thread; the rest from one.

#ifndef HARMONY_TESTS_DAEMON_PROCESS_H_
#define HARMONY_TESTS_DAEMON_PROCESS_H_

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace harmony::testing {

// `name` in a directory of this test process's own: outputs of an earlier
// run (Bazel keeps the test's temporary directory) are not in the way of a
// daemon that refuses to overwrite them.
inline std::string RunTempPath(const std::string& name) {
  static const std::string* dir = [] {
    auto* d = new std::string(::testing::TempDir() + "/run-" + std::to_string(getpid()));
    std::filesystem::create_directories(*d);
    return d;
  }();
  return *dir + "/" + name;
}

// The tools, where Bazel puts them in a test's runfiles.
inline constexpr char kDaemonBinary[] = "executor/harmony-exec";
inline constexpr char kCtlBinary[] = "executor/harmony-ctl";

class Daemon {
 public:
  static std::unique_ptr<Daemon> Start(const std::string& flags) {
    auto d = std::unique_ptr<Daemon>(new Daemon);
    int fds[2];
    if (pipe(fds) != 0) return nullptr;
    const std::string command = absl::StrCat("exec ", kDaemonBinary, " ", flags, " 2>&1");
    d->pid_ = fork();
    if (d->pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
      _exit(127);
    }
    close(fds[1]);
    d->fd_ = fds[0];
    d->reader_ = std::thread([raw = d.get()] { raw->Read(); });
    d->ready_.WaitForNotification();
    return d;
  }

  ~Daemon() {
    if (!exited_) Signal(SIGKILL);
    Wait();
  }

  // "127.0.0.1:PORT", or empty when it exited without listening.
  const std::string& address() const { return address_; }
  std::string output() const {
    absl::MutexLock lock(&mu_);
    return output_;
  }

  void Signal(int sig) { kill(pid_, sig); }

  // The exit code (-signal when killed).
  int Wait() {
    if (!exited_) {
      int status = 0;
      waitpid(pid_, &status, 0);
      exited_ = true;
      code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    if (reader_.joinable()) reader_.join();
    return code_;
  }

  // harmony-ctl with `args` against this daemon, with its token (unless
  // `args` names one).
  std::string Ctl(const std::string& args) const {
    const bool own_token = args.find("--token-file") == std::string::npos && !token_file_.empty();
    return absl::StrCat(kCtlBinary, " ", args, " --address ", address_,
                        own_token ? absl::StrCat(" --token-file ", token_file_) : "");
  }
  // The file holding its token; empty with --no-auth.
  const std::string& token_file() const { return token_file_; }

 private:
  Daemon() = default;

  void Read() {
    char buffer[4096];
    const std::string marker = "listening on ";
    while (true) {
      const ssize_t n = read(fd_, buffer, sizeof buffer);
      if (n <= 0) break;
      absl::MutexLock lock(&mu_);
      output_.append(buffer, n);
      const size_t at = output_.find(marker);
      const size_t line_end = at == std::string::npos ? at : output_.find('\n', at);
      if (!ready_.HasBeenNotified() && line_end != std::string::npos) {
        const std::string line = output_.substr(at, line_end - at);
        const size_t end = line.find(' ', marker.size());
        address_ = line.substr(marker.size(), end - marker.size());
        // "..., token in STATE/token, ..." or "...)".
        const std::string token_marker = ", token in ";
        const size_t token = line.find(token_marker);
        if (token != std::string::npos) {
          const size_t from = token + token_marker.size();
          const size_t to = line.find_first_of(",)", from);
          token_file_ = line.substr(from, to - from);
        }
        ready_.Notify();
      }
    }
    close(fd_);
    if (!ready_.HasBeenNotified()) ready_.Notify();
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  std::thread reader_;
  absl::Notification ready_;
  std::string address_;
  std::string token_file_;
  mutable absl::Mutex mu_;
  std::string output_;
  bool exited_ = false;
  int code_ = 0;
};


}  // namespace harmony::testing

#endif  // HARMONY_TESTS_DAEMON_PROCESS_H_
