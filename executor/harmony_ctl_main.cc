// harmony-ctl: the client of the harmony-exec daemon. Submits plans, shows
// jobs and devices, watches a job train, prints its log, cancels it.

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <google/protobuf/util/json_util.h>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/denormals.h"
#include "common/files.h"
#include "common/json_config.h"
#include "common/units.h"
#include "executor/client/client.h"
#include "executor/client/transfer.h"
#include "executor/client/job_text.h"
#include "executor/client/recipe_flags.h"
#include "executor/client/world_submit.h"
#include "proto/executor.pb.h"

namespace po = boost::program_options;

namespace {

using harmony::common::FormatBytes;
using harmony::executor::ExecutorClient;
using harmony::executor::Ended;
using harmony::executor::PrintDevices;
using harmony::executor::PrintJob;
using harmony::executor::PrintList;
using harmony::executor::ProgressLine;
using harmony::executor::StateName;
using harmony::executor::ToJson;

constexpr char kUsage[] =
    "Usage: harmony-ctl [--address HOST:PORT] [--token-file F] [--tls-ca CA] [--json]\n"
    "                   COMMAND [ARGS]\n"
    "\n"
    "Drives the harmony-exec daemon of a server. The global flags go before or after\n"
    "the command. The daemon's address defaults to $HARMONY_ADDRESS, else\n"
    "127.0.0.1:7770; the token file to $HARMONY_TOKEN_FILE.\n"
    "\n"
    "Commands:\n"
    "  submit PLAN --model M --data D --iterations K [--wait]   queue a training job\n"
    "  status [JOB]     one job in detail, or the daemon's devices and jobs\n"
    "  list             every job, oldest first\n"
    "  watch JOB        follow a job to its end (progress bar on a terminal)\n"
    "  logs JOB         the job's log\n"
    "  cancel JOB       stop a job at its next task boundary\n"
    "  fetch JOB -o F   the trained model (--checkpoint: the latest checkpoint) into F\n"
    "  devices          the daemon's devices and what runs on them\n"
    "\n"
    "`harmony-ctl COMMAND --help` lists a command's flags.\n"
    "Exit codes: 0 done; 1 the job failed or was cancelled, or the daemon refused;\n"
    "2 usage; 3 daemon unreachable; 4 no such job; 5 unauthenticated.\n";

constexpr char kDefaultAddress[] = "127.0.0.1:7770";

int ExitCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return 3;
    case absl::StatusCode::kNotFound:
      return 4;
    case absl::StatusCode::kUnauthenticated:
      return 5;
    default:
      return 1;
  }
}

int Fail(const absl::Status& s) {
  std::cerr << "harmony-ctl: " << s.message() << "\n";
  return ExitCode(s);
}

// The value of environment variable `name`, or `otherwise` when unset or
// empty.
std::string FromEnvironment(const char* name, const std::string& otherwise) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : otherwise;
}

struct Common {
  std::string address = FromEnvironment("HARMONY_ADDRESS", kDefaultAddress);
  std::string token_file = FromEnvironment("HARMONY_TOKEN_FILE", "");
  std::string state_dir = FromEnvironment("HARMONY_STATE_DIR", "");
  std::string tls_ca;
  bool json = false;
};

void AddCommon(po::options_description& flags, Common& c) {
  // clang-format off
  flags.add_options()
      ("help,h", "show this help")
      ("address", po::value(&c.address)->default_value(c.address),
       "the daemon, host:port (default: $HARMONY_ADDRESS, else 127.0.0.1:7770)")
      ("token-file", po::value(&c.token_file),
       "a file holding the daemon's token (default: $HARMONY_TOKEN_FILE, else the token "
       "in --state-dir)")
      ("state-dir", po::value(&c.state_dir),
       "the daemon's state directory, whose token file harmony-ctl reads (default: "
       "$HARMONY_STATE_DIR, else ./harmony-state when it holds one)")
      ("tls-ca", po::value(&c.tls_ca),
       "speak TLS, trusting the daemon certificate signed by this CA (PEM)")
      ("json", po::bool_switch(&c.json), "print JSON for scripts");
  // clang-format on
}

absl::StatusOr<harmony::executor::ClientOptions> ClientOptionsOf(const Common& c) {
  harmony::executor::ClientOptions options;
  options.address = c.address;
  // The token: the file named, else the state directory's (the daemon's
  // default, ./harmony-state, when it has one and no directory is named).
  std::string token_file = c.token_file;
  if (token_file.empty() && !c.state_dir.empty()) {
    token_file = harmony::executor::TokenPathIn(c.state_dir);
  } else if (token_file.empty()) {
    const std::string local = harmony::executor::TokenPathIn("harmony-state");
    if (::access(local.c_str(), R_OK) == 0) token_file = local;
  }
  if (!token_file.empty()) {
    auto token = harmony::common::ReadFileToString(token_file);
    if (!token.ok()) {
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot read the daemon's token from ", token_file, " (", token.status().message(),
          "): a user who may use the daemon is given the file (--token-file) or its group "
          "(harmony-exec --token-group)"));
    }
    options.token = std::string(absl::StripAsciiWhitespace(*token));
  }
  if (!c.tls_ca.empty()) {
    auto ca = harmony::common::ReadFileToString(c.tls_ca);
    if (!ca.ok()) return ca.status();
    options.tls_root_certs = *ca;
  }
  return options;
}

absl::StatusOr<std::unique_ptr<ExecutorClient>> Connect(const Common& c) {
  auto options = ClientOptionsOf(c);
  if (!options.ok()) return options.status();
  return ExecutorClient::Create(*options);
}

// Parses `args` with `flags` (plus positionals); false after printing why.
bool Parse(const std::vector<std::string>& args, po::options_description& flags,
           const po::options_description& hidden, const po::positional_options_description& pos,
           po::variables_map& vm, int* exit_code) {
  po::options_description all;
  all.add(flags).add(hidden);
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
  } catch (const po::error& e) {
    std::cerr << "harmony-ctl: " << e.what() << " (see --help)\n";
    *exit_code = 2;
    return false;
  }
  if (vm.count("help")) {
    std::cout << flags;
    *exit_code = 0;
    return false;
  }
  return true;
}

// Follows a job to its end. 0 when it succeeded, 1 when it failed or was
// cancelled; the client's error otherwise.
int Watch(ExecutorClient& client, const std::string& id, bool json) {
  const bool tty = isatty(STDOUT_FILENO) && !json;
  bool bar_open = false;
  int last_state = 0;
  std::string last_reason;
  absl::Time last_line = absl::InfinitePast();
  absl::Status s = client.Watch(id, [&](const harmony::proto::JobEvent& e) {
    if (json) {
      std::string line;
      google::protobuf::util::JsonPrintOptions o;
      o.preserve_proto_field_names = true;
      (void)google::protobuf::util::MessageToJsonString(e, &line, o);
      std::cout << line << std::endl;
    } else if (e.has_progress()) {
      if (tty) {
        std::cout << "\r" << ProgressLine(e.progress(), true) << "\033[K" << std::flush;
        bar_open = true;
      } else if (absl::Now() - last_line >= absl::Seconds(1) ||
                 e.progress().iteration() == e.progress().iterations()) {
        // Not a terminal: a plain line at most once a second, and the last.
        last_line = absl::Now();
        std::cout << id << " " << ProgressLine(e.progress(), false) << std::endl;
      }
    } else if (e.has_state_change()) {
      if (bar_open) std::cout << "\n";
      bar_open = false;
      const auto& c = e.state_change();
      std::cout << id << " " << StateName(c.state()) << (c.reason().empty() ? "" : ": ")
                << c.reason() << std::endl;
    }
    if (e.has_state_change()) {
      last_state = e.state_change().state();
      last_reason = e.state_change().reason();
    }
    return true;
  });
  if (bar_open) std::cout << "\n";
  if (!s.ok()) return Fail(s);
  if (!Ended(last_state)) {
    return Fail(absl::UnavailableError(
        absl::StrCat("the watch of ", id, " ended before the job did")));
  }
  return last_state == harmony::proto::SUCCEEDED ? 0 : 1;
}

std::string AbsolutePath(const std::string& path) {
  if (path.empty()) return path;
  return std::filesystem::absolute(path).lexically_normal().string();
}

int Submit(const std::vector<std::string>& args) {
  Common common;
  std::string plan_path, model, data, optimizer = "sgd", out, submission_id, name, config_path,
      resume, world_list, flush_denormal, token_dtype, tensorboard_dir, precision;
  int64_t seq_len = 0;
  double world_timeout = 60;
  bool shard = false;
  int64_t iterations = 0, checkpoint_interval = 0, keep_checkpoints = 2;
  double checkpoint_minutes = 0;
  uint64_t seed = 0;
  double lr = 0.01, momentum = 0, weight_decay = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool wait = false, upload = false;
  std::string upload_limit = "64MiB";
  po::options_description flags(
      "Usage: harmony-ctl submit PLAN --model M --data D --iterations K [flags]\n\n"
      "Queues a training job with the daemon and prints its id. Paths are on the\n"
      "daemon's machine (relative ones are made absolute here). A --config JSON\n"
      "file may give any of the settings (keys: the flag names with '_' for '-',\n"
      "and \"plan\"; relative paths are relative to the file); flags win.\n\nFlags");
  // clang-format off
  flags.add_options()
      ("config", po::value(&config_path), "job settings in a JSON file")
      ("model", po::value(&model), "the TorchScript model the plan was made for")
      ("data", po::value(&data),
       "training data, torch.save {\"inputs\", \"targets\"}, or a token file (.bin, .npy) "
       "cut into windows of --seq-len + 1 tokens")
      ("token-dtype", po::value(&token_dtype), "uint16 | uint32: a .bin token file's ids")
      ("seq-len", po::value(&seq_len), "T: tokens per sample of a token file")
      ("precision", po::value(&precision),
       "fp32 | bf16: the precision the plan must train in (harmony-plan --precision); "
       "a plan made for the other is refused (default: the plan's)")
      ("tensorboard", po::value(&tensorboard_dir),
       "write the job's TensorBoard event files here (on the daemon's machine; default: "
       "its state dir's tensorboard/<job id>; harmony-ctl status says where)")
      ("iterations", po::value(&iterations), "minibatches to train")
      ("optimizer", po::value(&optimizer), "sgd | adam | adamw (default sgd)")
      ("lr", po::value(&lr), "learning rate (default 0.01)")
      ("momentum", po::value(&momentum), "SGD momentum (default 0)")
      ("weight-decay", po::value(&weight_decay), "weight decay (default 0)")
      ("beta1", po::value(&beta1), "Adam beta1 (default 0.9)")
      ("beta2", po::value(&beta2), "Adam beta2 (default 0.999)")
      ("eps", po::value(&eps), "Adam epsilon (default 1e-8)")
      ("seed", po::value(&seed), "shuffle the samples with this seed (default 0: in order)")
      ("flush-denormal", po::value(&flush_denormal),
       "on | off: denormal floats flushed to zero on every thread that computes (default: "
       "as the plan was profiled; see the README's \"Denormal numbers\")")
      ("out", po::value(&out),
       "write the trained model here (TorchScript); an existing file is refused")
      ("overwrite", "let --out replace an existing file")
      ("checkpoint-interval", po::value(&checkpoint_interval),
       "a checkpoint every N iterations, at the end and on cancel (default 0: none); "
       "a job with checkpoints killed with the daemon resumes when it restarts")
      ("checkpoint-minutes", po::value(&checkpoint_minutes),
       "also a checkpoint every T minutes (e.g. 30); turns checkpoints on by itself too")
      ("keep-checkpoints", po::value(&keep_checkpoints),
       "the latest checkpoints kept on the server (default 2)")
      ("resume", po::value(&resume),
       "start from a checkpoint: a job id (its latest) or a checkpoint file or directory on "
       "the server; --iterations counts from the start of training")
      ("submission-id", po::value(&submission_id),
       "your id for this submission: resubmitting it returns the same job")
      ("name", po::value(&name), "a name to show in `harmony-ctl list`")
      ("upload-model", "send the model file's bytes whatever its size")
      ("by-path",
       "send the paths of the model and data (on the daemon's machine, under its "
       "--allow-path roots) instead of their bytes (default: files up to --upload-limit go as "
       "bytes, so the daemon opens nothing you name)")
      ("upload-limit", po::value(&upload_limit)->default_value(upload_limit),
       "files larger than this go by path")
      ("world", po::value(&world_list),
       "train on several daemons together, data parallel: host:port,host:port,... in rank "
       "order (rank 0 writes --out and checkpoints). Admitted on all of them or on none; "
       "the global minibatch is the number of daemons x the plan's")
      ("shard-optimizer-state",
       "with --world: each daemon keeps 1/N of the optimizer state (ZeRO-1)")
      ("world-timeout", po::value(&world_timeout),
       "with --world: seconds to wait for the other daemons (to start, at each exchange) "
       "before the job fails naming the one that is gone (default 60)")
      ("wait",
       "follow the job to its end; exit 0 only if it succeeded");
  // clang-format on
  harmony::executor::RecipeFlags recipe;
  harmony::executor::AddRecipeFlags(flags, &recipe);
  AddCommon(flags, common);
  po::options_description hidden;
  hidden.add_options()("plan", po::value(&plan_path));
  po::positional_options_description pos;
  pos.add("plan", 1);
  bool overwrite = false;  // --overwrite, or the config's "overwrite".
  po::variables_map vm;
  int code = 0;
  if (!Parse(args, flags, hidden, pos, vm, &code)) return code;
  if (vm.count("config")) {
    auto config = harmony::common::JsonConfig::Load(vm["config"].as<std::string>());
    if (!config.ok()) return Fail(config.status());
    config->GetPath("plan", &plan_path);
    config->GetPath("model", &model);
    config->GetPath("data", &data);
    config->Get("iterations", &iterations);
    config->Get("optimizer", &optimizer);
    config->Get("lr", &lr);
    config->Get("momentum", &momentum);
    config->Get("weight_decay", &weight_decay);
    config->Get("beta1", &beta1);
    config->Get("beta2", &beta2);
    config->Get("eps", &eps);
    config->Get("seed", &seed);
    config->Get("flush_denormal", &flush_denormal);
    config->Get("token_dtype", &token_dtype);
    config->Get("seq_len", &seq_len);
    config->Get("precision", &precision);
    config->GetPath("tensorboard", &tensorboard_dir);
    config->GetPath("out", &out);
    config->Get("overwrite", &overwrite);
    config->Get("checkpoint_interval", &checkpoint_interval);
    config->Get("checkpoint_minutes", &checkpoint_minutes);
    config->Get("keep_checkpoints", &keep_checkpoints);
    config->Get("resume", &resume);
    config->Get("submission_id", &submission_id);
    config->Get("name", &name);
    config->Get("upload_model", &upload);
    config->Get("wait", &wait);
    config->Get("world", &world_list);
    config->Get("world_timeout", &world_timeout);
    config->Get("shard_optimizer_state", &shard);
    harmony::executor::ReadRecipeConfig(*config, &recipe);
    if (absl::Status s = config->Finish(); !s.ok()) {
      std::cerr << "harmony-ctl: " << s.message() << "\n";
      return 2;
    }
  }
  po::notify(vm);
  if (vm.count("wait")) wait = true;
  if (vm.count("upload-model")) upload = true;
  harmony::executor::ReadRecipeSwitches(vm, &recipe);
  if (plan_path.empty() || model.empty() || data.empty() || iterations < 1) {
    std::cerr << "harmony-ctl: submit needs PLAN, --model, --data and --iterations (>= 1) "
                 "(see --help)\n";
    return 2;
  }
  harmony::proto::SubmitJobRequest request;
  auto plan = harmony::common::ReadFileToString(plan_path);
  if (!plan.ok()) return Fail(plan.status());
  request.set_plan(*plan);
  request.set_token_dtype(token_dtype);
  request.set_seq_len(seq_len);
  if (!precision.empty()) {
    if (precision != "fp32" && precision != "bf16") {
      std::cerr << "harmony-ctl: --precision \"" << precision << "\": expected fp32 or bf16\n";
      return 2;
    }
    request.set_bf16(precision == "bf16");
  }
  if (!tensorboard_dir.empty()) request.set_tensorboard_dir(AbsolutePath(tensorboard_dir));
  request.set_iterations(static_cast<uint32_t>(iterations));
  auto* o = request.mutable_optimizer();
  const std::string kind = absl::AsciiStrToLower(optimizer);
  if (kind == "sgd") {
    o->set_kind(harmony::proto::SGD);
  } else if (kind == "adam") {
    o->set_kind(harmony::proto::ADAM);
  } else if (kind == "adamw") {
    o->set_kind(harmony::proto::ADAMW);
  } else {
    std::cerr << "harmony-ctl: unknown optimizer \"" << optimizer
              << "\"; expected sgd, adam or adamw\n";
    return 2;
  }
  o->set_learning_rate(lr);
  o->set_momentum(momentum);
  o->set_weight_decay(weight_decay);
  o->set_beta1(beta1);
  o->set_beta2(beta2);
  o->set_epsilon(eps);
  if (!recipe.eval_data.empty()) recipe.eval_data = AbsolutePath(recipe.eval_data);
  harmony::executor::ToProto(recipe, o);
  auto limit = harmony::common::ParseBytes(upload_limit);
  if (!limit.ok()) return Fail(limit.status());
  if (absl::Status s = harmony::executor::AttachFiles(model, data, recipe.eval_data,
                                                      vm.count("by-path") > 0, upload, *limit,
                                                      &request);
      !s.ok()) {
    return Fail(s);
  }
  request.set_output_path(AbsolutePath(out));
  request.set_overwrite(overwrite || vm.count("overwrite") > 0);
  request.set_checkpoint_interval(static_cast<uint32_t>(checkpoint_interval));
  if (checkpoint_minutes < 0 || keep_checkpoints < 1) {
    std::cerr << "harmony-ctl: --checkpoint-minutes must be >= 0 and --keep-checkpoints >= 1\n";
    return 2;
  }
  request.set_checkpoint_minutes(checkpoint_minutes);
  request.set_keep_checkpoints(static_cast<uint32_t>(keep_checkpoints));
  // A job id stays as is; a path is made absolute, as the others.
  request.set_resume(absl::StartsWith(resume, "job-") ? resume : AbsolutePath(resume));
  request.set_submission_id(submission_id);
  request.set_seed(seed);
  request.set_name(name);
  if (!flush_denormal.empty()) {
    absl::StatusOr<bool> flush = harmony::common::ParseFlushDenormal(flush_denormal);
    if (!flush.ok()) return Fail(flush.status());
    request.set_flush_denormal(*flush);
  }

  if (!world_list.empty()) {
    auto options = ClientOptionsOf(common);
    if (!options.ok()) return Fail(options.status());
    harmony::executor::WorldSubmission world;
    world.daemons = harmony::executor::ParseWorldList(world_list);
    world.shard_optimizer_state = shard || vm.count("shard-optimizer-state") > 0;
    world.timeout_s = world_timeout;
    auto job = harmony::executor::SubmitToWorld(*options, world, request);
    if (!job.ok()) return Fail(job.status());
    std::cout << job->job_ids[0] << " (" << job->world_id << ": ";
    for (size_t r = 0; r < job->job_ids.size(); ++r) {
      std::cout << (r ? ", " : "") << "rank " << r << " " << world.daemons[r] << " "
                << job->job_ids[r];
    }
    std::cout << ")" << std::endl;
    if (!wait) return 0;
    options->address = world.daemons[0];
    return Watch(*ExecutorClient::Create(*options), job->job_ids[0], common.json);
  }
  auto client = Connect(common);
  if (!client.ok()) return Fail(client.status());
  auto response = (*client)->Submit(request);
  if (!response.ok()) return Fail(response.status());
  if (common.json) {
    std::cout << ToJson(*response) << std::endl;
  } else {
    std::cout << response->job_id()
              << (response->already_submitted() ? " (already submitted with this id)" : "")
              << std::endl;
  }
  if (!wait) return 0;
  return Watch(**client, response->job_id(), common.json);
}

int Simple(const std::string& command, const std::vector<std::string>& args) {
  Common common;
  std::string job;
  const bool needs_job =
      command == "watch" || command == "logs" || command == "cancel" || command == "fetch";
  std::string out;
  po::options_description flags(absl::StrCat(
      "Usage: harmony-ctl ", command,
      needs_job ? " JOB" : (command == "status" ? " [JOB]" : ""), " [flags]\n\nFlags"));
  AddCommon(flags, common);
  if (command == "fetch") {
    flags.add_options()("output,o", po::value(&out), "the file to write (required)")(
        "checkpoint", "the job's latest checkpoint instead of its trained model")(
        "overwrite", "replace the file when it exists");
  }
  po::options_description hidden;
  hidden.add_options()("job", po::value(&job));
  po::positional_options_description pos;
  if (needs_job || command == "status") pos.add("job", 1);
  po::variables_map vm;
  int code = 0;
  if (!Parse(args, flags, hidden, pos, vm, &code)) return code;
  po::notify(vm);
  if (needs_job && job.empty()) {
    std::cerr << "harmony-ctl: " << command << " needs a JOB id (see `harmony-ctl list`)\n";
    return 2;
  }
  auto connected = Connect(common);
  if (!connected.ok()) return Fail(connected.status());
  ExecutorClient& client = **connected;

  if (command == "watch") return Watch(client, job, common.json);
  if (command == "fetch") {
    if (out.empty()) {
      std::cerr << "harmony-ctl: fetch needs -o FILE\n";
      return 2;
    }
    uint64_t bytes = 0;
    if (absl::Status s = harmony::executor::FetchTo(client, job, out, vm.count("checkpoint") > 0,
                                                    vm.count("overwrite") > 0, &bytes);
        !s.ok()) {
      return Fail(s);
    }
    std::cout << "wrote " << out << " (" << harmony::common::FormatBytes(bytes) << ")\n";
    return 0;
  }
  if (command == "status" && !job.empty()) {
    auto j = client.GetJob(job);
    if (!j.ok()) return Fail(j.status());
    if (common.json) {
      std::cout << ToJson(*j) << std::endl;
    } else {
      PrintJob(*j);
    }
    return 0;
  }
  if (command == "cancel") {
    auto j = client.Cancel(job);
    if (!j.ok()) return Fail(j.status());
    if (common.json) {
      std::cout << ToJson(*j) << std::endl;
    } else {
      std::cout << j->id() << " " << StateName(j->state()) << (j->reason().empty() ? "" : ": ")
                << j->reason() << "\n";
    }
    return 0;
  }
  if (command == "logs") {
    auto lines = client.Logs(job);
    if (!lines.ok()) return Fail(lines.status());
    for (const std::string& line : *lines) std::cout << line << "\n";
    return 0;
  }
  if (command == "list") {
    auto jobs = client.ListJobs();
    if (!jobs.ok()) return Fail(jobs.status());
    if (common.json) {
      harmony::proto::ListJobsResponse r;
      for (auto& j : *jobs) *r.add_jobs() = j;
      std::cout << ToJson(r) << std::endl;
    } else {
      PrintList(*jobs);
    }
    return 0;
  }
  // devices, and status without a job: the devices and a count of jobs.
  auto devices = client.Devices();
  if (!devices.ok()) return Fail(devices.status());
  if (command == "devices") {
    if (common.json) {
      std::cout << ToJson(*devices) << std::endl;
    } else {
      PrintDevices(*devices);
    }
    return 0;
  }
  auto jobs = client.ListJobs();
  if (!jobs.ok()) return Fail(jobs.status());
  std::map<int, int> by_state;
  for (const auto& j : *jobs) ++by_state[j.state()];
  if (common.json) {
    std::cout << "{\"address\": \"" << client.address() << "\", \"jobs\": {";
    bool first = true;
    for (const auto& [state, n] : by_state) {
      std::cout << (first ? "" : ", ") << "\"" << StateName(state) << "\": " << n;
      first = false;
    }
    std::cout << "}}" << std::endl;
    return 0;
  }
  std::cout << "daemon at " << client.address() << "\n";
  PrintDevices(*devices);
  std::vector<std::string> counts;
  for (const auto& [state, n] : by_state) counts.push_back(absl::StrCat(n, " ", StateName(state)));
  std::cout << "jobs: " << (counts.empty() ? "none" : absl::StrJoin(counts, ", ")) << "\n";
  return 0;
}

}  // namespace

// Moves the global flags given before the command (`harmony-ctl --address A
// list`, as git and kubectl take them) after it, where each command parses
// them. Returns an unknown flag found before the command ("" if none).
std::string HoistGlobalFlags(std::vector<std::string>& args) {
  static const std::set<std::string> kWithValue = {"--address", "--token-file", "--tls-ca"};
  std::vector<std::string> globals;
  size_t i = 0;
  while (i < args.size() && absl::StartsWith(args[i], "--") && args[i] != "--help") {
    const std::string flag = args[i].substr(0, args[i].find('='));
    if (flag == "--json") {
      globals.push_back(args[i++]);
    } else if (kWithValue.count(flag)) {
      globals.push_back(args[i++]);
      if (flag == args[i - 1] && i < args.size()) globals.push_back(args[i++]);
    } else {
      return args[i];
    }
  }
  args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(i));
  if (!args.empty()) args.insert(args.end(), globals.begin(), globals.end());
  return "";
}

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (const std::string unknown = HoistGlobalFlags(args); !unknown.empty()) {
    std::cerr << "harmony-ctl: unknown global flag \"" << unknown
              << "\" before the command\n" << kUsage;
    return 2;
  }
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "submit") return Submit(args);
  if (command == "status" || command == "list" || command == "watch" || command == "logs" ||
      command == "cancel" || command == "devices" || command == "fetch") {
    return Simple(command, args);
  }
  std::cerr << "harmony-ctl: unknown command \"" << command << "\"\n" << kUsage;
  return 2;
}
