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

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace harmony::testing {

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

  std::string Ctl(const std::string& args) const {
    return absl::StrCat(kCtlBinary, " ", args, " --address ", address_);
  }

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
      if (!ready_.HasBeenNotified() && at != std::string::npos) {
        const size_t end = output_.find(' ', at + marker.size());
        if (end != std::string::npos) {
          address_ = output_.substr(at + marker.size(), end - at - marker.size());
          ready_.Notify();
        }
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
  mutable absl::Mutex mu_;
  std::string output_;
  bool exited_ = false;
  int code_ = 0;
};


}  // namespace harmony::testing

#endif  // HARMONY_TESTS_DAEMON_PROCESS_H_
