// harmony-exec: runs plans. Without a command it is the per-server daemon
// that harmony-ctl talks to (gRPC); `harmony-exec run` trains one plan here
// and now (tests, benchmarks, a first try).

#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/denormals.h"
#include "common/device_spec.h"
#include "common/files.h"
#include "common/json_config.h"
#include "common/plan_file.h"
#include "common/tensor_file.h"
#include "common/status.h"
#include "common/units.h"
#include "executor/dist/collective.h"
#include "executor/dist/world_setup.h"
#include "executor/runtime/checkpoint.h"
#include "executor/runtime/metrics.h"
#include "executor/runtime/runtime.h"
#include "executor/exec_run.h"
#include "executor/service/daemon.h"
#include "optim/cpu_optimizer.h"

namespace po = boost::program_options;

namespace {

constexpr char kUsage[] =
    "Usage: harmony-exec [--listen 127.0.0.1:7770] [--devices cpu:4x2GiB] [--state-dir DIR]\n"
    "                    [--auth-token-file F] [--tls-cert C --tls-key K] [--max-queued N]\n"
    "                    [--config daemon.json]\n"
    "       harmony-exec run PLAN --model M --data D --iterations K [--devices SPEC]\n"
    "                        [flags]\n"
    "\n"
    "Without a command, harmony-exec is the per-server daemon: it takes jobs from\n"
    "harmony-ctl over gRPC, queues them and trains them on its devices.\n"
    "`harmony-exec --help` lists the daemon's flags.\n"
    "\n"
    "Commands:\n"
    "  run    train a plan from harmony-plan on local devices and exit\n"
    "         (`harmony-exec run --help` lists its flags)\n";

using harmony::executor::Fail;
using harmony::executor::ParseFlags;

// The daemon: runs until SIGINT or SIGTERM.
int Serve(const std::vector<std::string>& args) {
  harmony::executor::DaemonOptions options;
  std::string devices_text = "cpu:4x2GiB", host_memory_text, message_text = "256MiB",
              config_path;
  options.state_dir = "harmony-state";
  po::options_description flags(
      "Usage: harmony-exec [flags]\n\n"
      "The per-server daemon: takes jobs from harmony-ctl over gRPC, queues them\n"
      "(first in, first out) and trains each on its devices. Job records live in\n"
      "the state directory and survive restarts. Stop it with Ctrl-C or SIGTERM.\n\n"
      "Flags (a --config JSON file may set any of them: keys are the flag names\n"
      "with '_' for '-'; flags given here win)");
  // clang-format off
  flags.add_options()
      ("help,h", "show this help")
      ("config", po::value(&config_path), "daemon settings in a JSON file")
      ("listen", po::value(&options.listen),
       "host:port to serve on (default 127.0.0.1:7770; port 0 picks one)")
      ("devices", po::value(&devices_text),
       "the devices jobs run on (default cpu:4x2GiB; in a CUDA build also cuda, cuda:N, "
       "cuda:NxSIZE)")
      ("state-dir", po::value(&options.state_dir),
       "job records, logs, plans, checkpoints (default ./harmony-state)")
      ("auth-token-file", po::value(&options.auth_token_file),
       "every call must carry the token in this file (default: the daemon's own, "
       "STATE/token, made at its first start, readable only by this account; daemons of "
       "one world are all given the same file)")
      ("allow-path", po::value(&options.allowed_paths)->composing(),
       "a directory under which jobs may name files (data, model, --out, --resume, "
       "TensorBoard); repeat for several; / allows every path (default: the directory "
       "harmony-exec starts in; its state directory always)")
      ("token-group", po::value(&options.token_group),
       "make STATE/token readable by this group too (mode 0640)")
      ("no-auth",
       "no token on loopback: every local user may submit, cancel and read every job "
       "(a single-user machine)")
      ("tls-cert", po::value(&options.tls_cert_file), "TLS certificate (PEM)")
      ("tls-key", po::value(&options.tls_key_file), "TLS private key (PEM)")
      ("peer-ca", po::value(&options.peer_ca_file),
       "PEM roots to verify other daemons of a world job with (default: --tls-cert); they "
       "are called with this daemon's token")
      ("max-queued", po::value(&options.max_queued),
       "refuse submissions while this many jobs wait (default 64)")
      ("host-memory", po::value(&host_memory_text),
       "host memory jobs may use together, e.g. 16GiB (default: what is available)")
      ("max-message-size", po::value(&message_text),
       "largest request, uploaded models included (default 256MiB)");
  // clang-format on
  po::variables_map vm;
  if (auto code = ParseFlags(args, flags, flags, po::positional_options_description(), vm)) {
    return *code;
  }
  if (vm.count("config")) {
    auto config = harmony::common::JsonConfig::Load(vm["config"].as<std::string>());
    if (!config.ok()) return Fail(config.status());
    config->Get("listen", &options.listen);
    config->Get("devices", &devices_text);
    config->GetPath("state_dir", &options.state_dir);
    config->GetPath("auth_token_file", &options.auth_token_file);
    config->Get("token_group", &options.token_group);
    config->Get("no_auth", &options.no_auth);
    std::string allow_path;
    config->GetPath("allow_path", &allow_path);
    if (!allow_path.empty()) options.allowed_paths.push_back(allow_path);
    config->GetPath("tls_cert", &options.tls_cert_file);
    config->GetPath("tls_key", &options.tls_key_file);
    config->GetPath("peer_ca", &options.peer_ca_file);
    config->Get("max_queued", &options.max_queued);
    config->Get("host_memory", &host_memory_text);
    config->Get("max_message_size", &message_text);
    if (absl::Status s = config->Finish(); !s.ok()) return Fail(s);
  }
  po::notify(vm);  // Flags given on the command line win over the file.
  options.no_auth = options.no_auth || vm.count("no-auth") > 0;
  auto devices = harmony::common::ParseDeviceSpec(devices_text);
  if (!devices.ok()) return Fail(devices.status());
  options.devices = *devices;
  if (!host_memory_text.empty()) {
    auto bytes = harmony::common::ParseBytes(host_memory_text);
    if (!bytes.ok()) return Fail(bytes.status());
    options.host_memory = *bytes;
  }
  auto message_bytes = harmony::common::ParseBytes(message_text);
  if (!message_bytes.ok()) return Fail(message_bytes.status());
  options.max_message_bytes = *message_bytes;
  static std::mutex* log_mu = new std::mutex;
  options.log = [](const std::string& line) {
    std::lock_guard<std::mutex> lock(*log_mu);
    std::cout << absl::FormatTime("%Y-%m-%d %H:%M:%S ", absl::Now(), absl::LocalTimeZone())
              << line << std::endl;
  };

  // SIGINT and SIGTERM are taken by sigwait below: block them before any
  // thread starts so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto daemon = harmony::executor::Daemon::Start(options);
  if (!daemon.ok()) return Fail(daemon.status());
  options.log(absl::StrCat(
      "harmony-exec listening on ", (*daemon)->address(), " (devices ", devices->ToString(),
      ", state dir ", options.state_dir,
      (*daemon)->token_file().empty() ? ", no token"
                                      : absl::StrCat(", token in ", (*daemon)->token_file()),
      options.tls_cert_file.empty() ? "" : ", TLS", ")"));
  if ((*daemon)->token_file().empty()) {
    options.log("warning: --no-auth: every local user can submit, cancel and read every job");
  }
  options.log(absl::StrCat(
      "jobs may name files under ",
      options.allowed_paths.empty() ? std::filesystem::current_path().string()
                                    : absl::StrJoin(options.allowed_paths, ", "),
      " and the state directory (--allow-path)"));
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  options.log(absl::StrCat("stopping (", signal_number == SIGINT ? "SIGINT" : "SIGTERM",
                           "): running jobs are stopped, queued jobs kept"));
  (*daemon)->Shutdown();
  options.log("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0].rfind("-", 0) == 0) {
    if (!args.empty() && (args[0] == "-h")) {
      std::cout << kUsage;
      return 0;
    }
    return Serve(args);
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "run") return harmony::executor::RunCommand(args);
  std::cerr << "harmony-exec: unknown command \"" << command << "\"\n" << kUsage;
  return 2;
}
