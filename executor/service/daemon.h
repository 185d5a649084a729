// The harmony-exec daemon: a job manager behind the gRPC service, listening
// on one address (docs/DESIGN.md §7).
//
// Security: a loopback address (127.0.0.0/8, ::1, localhost) may be served
// without a token; any other address is refused unless a token file is
// given, and then every call must carry the token. With a certificate and
// key the daemon speaks TLS. Message sizes and the queue are bounded.
//
// Thread-safety: Start and Shutdown from one thread; the daemon runs its own.

#ifndef HARMONY_EXECUTOR_SERVICE_DAEMON_H_
#define HARMONY_EXECUTOR_SERVICE_DAEMON_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device_spec.h"

namespace harmony::executor {

struct DaemonOptions {
  // host:port; port 0 picks a free one (see Daemon::address()).
  std::string listen = "127.0.0.1:7770";
  common::DeviceSpec devices;
  std::string state_dir;
  // A file holding the token callers must present (whitespace trimmed).
  // Empty: the daemon's own, STATE/token, made at its first start
  // (daemon_token.h), unless no_auth.
  std::string auth_token_file;
  // STATE/token readable by this group too (mode 0640).
  std::string token_group;
  // No token (loopback only): every local user can call the daemon.
  bool no_auth = false;
  // Where jobs may name files (JobManagerOptions::allowed_paths).
  std::vector<std::string> allowed_paths;
  // PEM files; both or neither.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM roots this daemon verifies its peers' TLS with (world jobs); empty:
  // its own tls_cert_file. Peers get the daemon's own token.
  std::string peer_ca_file;
  int max_queued = 64;
  // Host memory for jobs, bytes; 0: what the machine has available.
  uint64_t host_memory = 0;
  // Largest request or response, bytes (uploaded models count).
  uint64_t max_message_bytes = 256ull << 20;
  // One line per event (listening, each job event); may be empty.
  std::function<void(const std::string&)> log;
};

// True for addresses only this machine can reach.
bool IsLoopbackAddress(const std::string& address);

class Daemon {
 public:
  // Errors: InvalidArgument for bad options (no_auth off loopback or with a
  // token file, half a TLS pair, an empty token file); NotFound/... for files
  // that cannot be read; Unavailable when the address cannot be bound; the
  // job manager's errors for the devices and the state directory.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const DaemonOptions& options);
  // Shuts down (see Shutdown).
  ~Daemon();

  // "host:port" actually bound.
  const std::string& address() const;
  // The file holding the token callers need; empty with no_auth.
  const std::string& token_file() const;

  // Stops taking calls, ends open watch streams, stops running jobs (they
  // are recorded FAILED "daemon stopped") and keeps queued jobs for the next
  // start. Idempotent.
  void Shutdown();

 private:
  struct Impl;
  explicit Daemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_SERVICE_DAEMON_H_
