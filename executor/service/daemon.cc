#include "executor/service/daemon.h"

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/status.h"
#include "common/units.h"
#include "executor/jobs/job_manager.h"
#include "executor/service/daemon_token.h"
#include "executor/service/service.h"

namespace harmony::executor {
namespace {

// "host:port" -> (host, port); "[::1]:7770" keeps the brackets off.
bool SplitHostPort(const std::string& address, std::string* host, std::string* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  int p = 0;
  return absl::SimpleAtoi(*port, &p) && p >= 0 && p < 65536;
}

}  // namespace

bool IsLoopbackAddress(const std::string& address) {
  std::string host, port;
  if (!SplitHostPort(address, &host, &port)) return false;
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

struct Daemon::Impl {
  std::unique_ptr<JobManager> manager;
  std::unique_ptr<ExecutorService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
  std::string token_file;
  bool shut_down = false;
};

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Daemon::~Daemon() { Shutdown(); }

const std::string& Daemon::address() const { return impl_->address; }

const std::string& Daemon::token_file() const { return impl_->token_file; }

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonOptions& options) {
  std::string host, port;
  if (!SplitHostPort(options.listen, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen ", options.listen, " is not host:port (e.g. 127.0.0.1:7770)"));
  }
  ServiceOptions service_options;
  service_options.max_model_bytes = options.max_message_bytes;
  std::string token_file;
  if (options.no_auth) {
    if (!options.auth_token_file.empty()) {
      return absl::InvalidArgumentError("--no-auth and --auth-token-file contradict: give one");
    }
    if (!IsLoopbackAddress(options.listen)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "refusing to listen on ", options.listen,
          " without a token (--no-auth): other machines could reach it. Leave --no-auth out, "
          "or listen on 127.0.0.1"));
    }
  } else if (!options.auth_token_file.empty()) {
    HARMONY_ASSIGN_OR_RETURN(std::string token,
                             common::ReadFileToString(options.auth_token_file));
    service_options.auth_token = std::string(absl::StripAsciiWhitespace(token));
    if (service_options.auth_token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file ", options.auth_token_file, " is empty"));
    }
    token_file = options.auth_token_file;
  } else {
    if (options.state_dir.empty()) {
      return absl::InvalidArgumentError("no state directory given (its token file lives there)");
    }
    HARMONY_ASSIGN_OR_RETURN(service_options.auth_token,
                             LoadOrCreateToken(options.state_dir, options.token_group));
    token_file = TokenPathIn(options.state_dir);
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls-cert and --tls-key");
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options.tls_cert_file.empty()) {
    HARMONY_ASSIGN_OR_RETURN(std::string cert, common::ReadFileToString(options.tls_cert_file));
    HARMONY_ASSIGN_OR_RETURN(std::string key, common::ReadFileToString(options.tls_key_file));
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({key, cert});
    credentials = grpc::SslServerCredentials(ssl);
  }
  // Daemon to daemon (a world job's cancel and status): this daemon's token,
  // and TLS verified with --peer-ca, or with its own certificate (a
  // cluster's daemons sharing one).
  service_options.peer.token = service_options.auth_token;
  const std::string peer_ca =
      !options.peer_ca_file.empty() ? options.peer_ca_file : options.tls_cert_file;
  if (!peer_ca.empty()) {
    HARMONY_ASSIGN_OR_RETURN(service_options.peer.tls_root_certs,
                             common::ReadFileToString(peer_ca));
  }

  auto impl = std::make_unique<Impl>();
  impl->token_file = token_file;
  JobManagerOptions jm;
  jm.devices = options.devices;
  jm.state_dir = options.state_dir;
  jm.allowed_paths = options.allowed_paths;
  jm.max_queued = options.max_queued;
  jm.host_memory = options.host_memory;
  jm.log = options.log;
  HARMONY_ASSIGN_OR_RETURN(impl->manager, JobManager::Create(jm));
  impl->service = std::make_unique<ExecutorService>(impl->manager.get(), service_options);

  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(options.listen, credentials, &bound_port);
  builder.RegisterService(impl->service.get());
  const int max_bytes = static_cast<int>(
      std::min<uint64_t>(options.max_message_bytes + (1 << 20), INT32_MAX));
  builder.SetMaxReceiveMessageSize(max_bytes);
  builder.SetMaxSendMessageSize(max_bytes);
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || bound_port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.listen, " (in use, or not an address of this machine)"));
  }
  impl->address = absl::StrCat(
      host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host, ":",
      bound_port);
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

void Daemon::Shutdown() {
  if (impl_->shut_down) return;
  impl_->shut_down = true;
  // Calls in flight get a moment to finish; open watch streams are then
  // cancelled. Only after that may the manager go.
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  impl_->server->Wait();
  impl_->manager.reset();
}

}  // namespace harmony::executor
