// `harmony-exec run`: trains one plan here and now, in this process
// (tests, benchmarks, a first try): the flags, the runtime, checkpoints and
// the per-iteration report.

#include "executor/exec_run.h"

#include <signal.h>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
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
#include "common/host_memory.h"
#include "common/status.h"
#include "common/units.h"
#include "executor/dist/collective.h"
#include "executor/dist/world_setup.h"
#include "executor/runtime/checkpoint.h"
#include "executor/runtime/metrics.h"
#include "executor/runtime/runtime.h"
#include "executor/service/daemon.h"
#include "optim/cpu_optimizer.h"
#include "executor/client/recipe_flags.h"
#include "executor/runtime/tensorboard.h"
#include "executor/runtime/recipe.h"

namespace po = boost::program_options;

namespace harmony::executor {

std::optional<int> ParseFlags(const std::vector<std::string>& args,
                              const po::options_description& shown,
                              const po::options_description& all,
                              const po::positional_options_description& positional,
                              po::variables_map& vm) {
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
  } catch (const po::error& e) {
    std::cerr << "harmony-exec: " << e.what() << " (see --help)\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << shown;
    return 0;
  }
  return std::nullopt;
}

int Fail(const absl::Status& status) {
  std::cerr << "harmony-exec: " << status.message() << "\n";
  return 1;
}

namespace {

using harmony::common::FormatBytes;

// "12%" of `part`, or "-".
std::string Share(double part, double whole) {
  return whole > 0 ? absl::StrFormat("%.0f%%", 100 * part / whole) : "-";
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  std::string plan_path, model, data, devices_text, optimizer = "sgd", out, metrics_path,
      trace_path, link_text;
  std::string checkpoint_dir, resume, store, flush_denormal, token_dtype, tensorboard_dir,
      precision;
  int64_t seq_len = 0;
  int rank = 0, world_size = 1;
  double world_timeout_s = 120;
  int64_t checkpoint_every = 0;
  double checkpoint_minutes = 0;
  int keep_checkpoints = 2;
  int iterations = 0, threads = 0;
  double lr = 0.01, momentum = 0, weight_decay = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  uint64_t seed = 0;
  po::options_description flags(
      "Usage: harmony-exec run PLAN --model M --data D --iterations K [--devices cpu:NxSIZE]\n\n"
      "Trains the model with the plan: weights, gradients and activations are\n"
      "swapped between host and devices as the plan says, the CPU optimizer\n"
      "updates each pack as soon as its gradients are in.\n\nFlags");
  // clang-format off
  flags.add_options()
      ("help,h", "show this help")
      ("model", po::value(&model), "the TorchScript model the plan was made for (required)")
      ("data", po::value(&data),
       "torch.save file: {\"inputs\": ..., \"targets\": ...} or a tensor tuple; or a token "
       "file (.bin of --token-dtype, .npy), memory-mapped, whose samples are windows of "
       "--seq-len + 1 tokens: forward's tokens and the targets (required)")
      ("token-dtype", po::value(&token_dtype),
       "uint16 | uint32: the ids of a .bin token file (a .npy says its own)")
      ("seq-len", po::value(&seq_len),
       "T: tokens per sample of a token file (the plan's sample length)")
      ("iterations", po::value(&iterations),
       "minibatches to train (required), counted from the start of training: a resumed "
       "run trains the ones its checkpoint has not")
      ("devices", po::value(&devices_text),
       "devices, e.g. cpu:2x256MiB; in a CUDA build also cuda, cuda:N or cuda:NxSIZE "
       "(default: the virtual CPU devices the plan was made for)")
      ("optimizer", po::value(&optimizer)->default_value(optimizer), "sgd | adam | adamw")
      ("lr", po::value(&lr)->default_value(lr), "learning rate")
      ("momentum", po::value(&momentum)->default_value(momentum), "SGD momentum")
      ("weight-decay", po::value(&weight_decay)->default_value(weight_decay),
       "L2 (sgd, adam) or decoupled (adamw) weight decay")
      ("beta1", po::value(&beta1)->default_value(beta1), "Adam beta1")
      ("beta2", po::value(&beta2)->default_value(beta2), "Adam beta2")
      ("eps", po::value(&eps)->default_value(eps), "Adam epsilon")
      ("seed", po::value(&seed)->default_value(0), "seed of the dropout stream and shuffling")
      ("shuffle", "shuffle the samples every epoch; a token file's windows start at random "
       "places drawn from --seed (default: in order)")
      ("out", po::value(&out), "write the trained model here (TorchScript)")
      ("checkpoint-dir", po::value(&checkpoint_dir),
       "write checkpoints here (checkpoint-<iteration>.pt): at the end, on Ctrl-C or "
       "SIGTERM, and as the next two flags say")
      ("checkpoint-every", po::value(&checkpoint_every), "a checkpoint every N iterations")
      ("checkpoint-minutes", po::value(&checkpoint_minutes),
       "a checkpoint every T minutes (e.g. 30)")
      ("keep-checkpoints", po::value(&keep_checkpoints)->default_value(2),
       "how many of the latest checkpoints stay on disk")
      ("resume", po::value(&resume),
       "continue from this checkpoint, or the latest in this directory: weights, optimizer "
       "state, data position and dropout stream (the plan may differ: another device count "
       "or mode)")
      ("rank", po::value(&rank)->default_value(0),
       "data parallel across servers: this server's rank (see --world-size)")
      ("world-size", po::value(&world_size)->default_value(1),
       "servers training together, each on its share of a world-size x minibatch global "
       "minibatch; gradients are summed across them (c10d Gloo) before each update")
      ("store", po::value(&store),
       "host:port where rank 0 hosts the world's rendezvous store (with --world-size > 1)")
      ("shard-optimizer-state",
       "ZeRO-1 across the servers: each keeps 1/world-size of the optimizer state; a "
       "vLayer's gradients are summed into its owner, which steps and sends the weights")
      ("world-timeout", po::value(&world_timeout_s)->default_value(world_timeout_s),
       "seconds to wait for the other servers (joining, each exchange) before failing")
      ("metrics", po::value(&metrics_path), "write per-iteration metrics here (JSON lines)")
      ("tensorboard", po::value(&tensorboard_dir),
       "write TensorBoard event files here (tensorboard --logdir DIR): train/loss, eval/loss, "
       "train/lr, train/grad_norm, train/samples_per_s, swap/host_link_bytes, "
       "device/peak_bytes, swap/wait_s, swap/peer_wait_s per iteration")
      ("trace", po::value(&trace_path), "write a Chrome trace of the iterations here")
      ("emulate-host-link", po::value(&link_text),
       "share one host link of this bandwidth among the devices, e.g. 200MB/s "
       "(figures are labelled emulated)")
      ("ignore-memory-check",
       "run even on devices smaller than the plan's (may run out of memory)")
      ("flush-denormal", po::value(&flush_denormal),
       "on | off: denormal floats flushed to zero (FTZ/DAZ) on every thread that computes "
       "or updates (default: as the plan was profiled)")
      ("precision", po::value(&precision),
       "fp32 | bf16: the plan's precision (harmony-plan --precision), checked: a plan "
       "made for the other is refused (default: the plan's)")
      ("threads-per-device", po::value(&threads)->default_value(0),
       "LibTorch intra-op threads each device computes on (0: the host's "
       "hardware threads divided among the plan's devices); a PyTorch loop "
       "compared bit for bit must use as many (torch.set_num_threads)");
  // clang-format on
  RecipeFlags recipe_flags;
  AddRecipeFlags(flags, &recipe_flags);
  po::options_description all;
  all.add(flags);
  all.add_options()("plan", po::value(&plan_path));
  po::positional_options_description positional;
  positional.add("plan", 1);
  po::variables_map vm;
  if (auto code = ParseFlags(args, flags, all, positional, vm)) return *code;
  po::notify(vm);
  if (plan_path.empty() || model.empty() || data.empty() || iterations < 1) {
    std::cerr << "harmony-exec: run needs PLAN, --model, --data and --iterations (>= 1) "
                 "(see --help)\n";
    return 2;
  }
  if (checkpoint_dir.empty() && (checkpoint_every > 0 || checkpoint_minutes > 0)) {
    std::cerr << "harmony-exec: --checkpoint-every and --checkpoint-minutes need "
                 "--checkpoint-dir\n";
    return 2;
  }
  if (checkpoint_every < 0 || checkpoint_minutes < 0 || keep_checkpoints < 1) {
    std::cerr << "harmony-exec: --checkpoint-every and --checkpoint-minutes must be >= 0, "
                 "--keep-checkpoints >= 1\n";
    return 2;
  }
  if (world_size < 1 || rank < 0 || rank >= world_size || (world_size > 1 && store.empty())) {
    std::cerr << "harmony-exec: --rank must be in [0, --world-size) and --world-size > 1 needs "
                 "--store HOST:PORT\n";
    return 2;
  }
  auto plan = harmony::common::ReadPlanFile(plan_path);
  if (!plan.ok()) return Fail(plan.status());
  auto devices = devices_text.empty() ? harmony::common::PlannedDevices(*plan)
                                      : harmony::common::ParseDeviceSpec(devices_text);
  if (!devices.ok()) return Fail(devices.status());
  if (devices_text.empty()) std::cout << "devices: the plan's, " << devices->ToString() << "\n";
  auto kind = harmony::optim::ParseOptimizerKind(optimizer);
  if (!kind.ok()) return Fail(kind.status());
  ReadRecipeSwitches(vm, &recipe_flags);

  harmony::executor::RuntimeOptions options;
  options.devices = *devices;
  options.optimizer.kind = *kind;
  options.optimizer.learning_rate = lr;
  options.optimizer.momentum = momentum;
  options.optimizer.weight_decay = weight_decay;
  options.optimizer.beta1 = beta1;
  options.optimizer.beta2 = beta2;
  options.optimizer.epsilon = eps;
  {
    // Every value checked before anything is loaded.
    TrainingRecipe& r = options.recipe;
    if (absl::Status s = ToRecipe(recipe_flags, &r); !s.ok()) return Fail(s);
    if (absl::Status s = ResolveRecipe(options.optimizer, iterations, r); !s.ok()) {
      std::cerr << "harmony-exec: " << s.message() << "\n";
      return 2;
    }
  }
  options.seed = seed;
  options.shuffle = vm.count("shuffle") > 0;
  if (!precision.empty()) {
    if (precision != "fp32" && precision != "bf16") {
      std::cerr << "harmony-exec: --precision \"" << precision << "\": expected fp32 or bf16\n";
      return 2;
    }
    options.bf16 = precision == "bf16";
  }
  options.check_device_memory = vm.count("ignore-memory-check") == 0;
  options.threads = threads;
  if (!flush_denormal.empty()) {
    absl::StatusOr<bool> flush = harmony::common::ParseFlushDenormal(flush_denormal);
    if (!flush.ok()) return Fail(flush.status());
    options.flush_denormal = *flush;
  }
  options.trace = !trace_path.empty();
  if (!link_text.empty()) {
    auto bw = harmony::common::ParseBandwidth(link_text);
    if (!bw.ok()) return Fail(bw.status());
    options.emulate_host_link = *bw;
  }
  // The world: joined before the runtime is made, so every rank's runtime
  // sees the same options.
  std::unique_ptr<harmony::executor::Collective> world;
  if (world_size > 1) {
    harmony::executor::CollectiveOptions co;
    if (absl::Status s = harmony::executor::ParseStoreAddress(store, co); !s.ok()) {
      std::cerr << "harmony-exec: --store: " << s.message() << "\n";
      return 2;
    }
    co.rank = rank;
    co.world_size = world_size;
    co.timeout = absl::Seconds(world_timeout_s);
    auto joined = harmony::executor::Collective::Join(co);
    if (!joined.ok()) return Fail(joined.status());
    world = *std::move(joined);
    std::cout << "rank " << rank << " of " << world_size << " (store " << store << ")\n";
    // Every rank must run the same job: the same model and plan minibatch,
    // optimizer, data order and length.
    const auto same = harmony::executor::CheckSameEverywhere(
        *world, {{"model sha256", plan->model().sha256()},
                 {"minibatch", absl::StrCat(plan->config().minibatch())},
                 {"optimizer", absl::StrCat(optimizer, " lr ", lr, " momentum ", momentum,
                                            " weight decay ", weight_decay, " betas ", beta1,
                                            " ", beta2, " eps ", eps)},
                 {"recipe", DescribeRecipe(options.optimizer, options.recipe)},
                 {"seed", absl::StrCat(seed, vm.count("shuffle") ? " shuffled" : " in order")},
                 {"iterations", absl::StrCat(iterations)},
                 {"shard-optimizer-state", vm.count("shard-optimizer-state") ? "yes" : "no"},
                 {"resume", resume.empty() ? "no" : "yes"}});
    if (!same.ok()) return Fail(same);
    options.world = harmony::executor::MakeWorld(*world, vm.count("shard-optimizer-state") > 0);
  }
  const uint32_t planned_servers = std::max<uint32_t>(1, plan->config().servers());
  if (planned_servers != static_cast<uint32_t>(world_size)) {
    std::cout << "note: the plan was made for " << planned_servers << " server(s) (harmony-plan "
              << "--servers), this run has " << world_size
              << ": its time estimate does not count this world's gradient exchanges\n";
  }
  auto runtime = harmony::executor::Runtime::Create(*plan, model, options);
  if (!runtime.ok()) return Fail(runtime.status());
  const int device_threads = (*runtime)->threads_per_device();
  const uint32_t profiled_threads = plan->profile().gemm_threads();
  if (profiled_threads > 0 && static_cast<int>(profiled_threads) != device_threads) {
    std::cout << "note: the plan was profiled on " << profiled_threads
              << " intra-op thread(s) per device, this run uses " << device_threads
              << " (--threads-per-device): its time estimates assume " << profiled_threads << "\n";
  }
  // The profile's times hold for the CPU and the denormal policy it was
  // measured under: a deep net's tiny gradients are ~100x slower to compute
  // on some x86 cores when not flushed.
  const bool flush = (*runtime)->flush_denormal();
  const bool profiled_flush = plan->profile().has_flush_denormal() && plan->profile().flush_denormal();
  if (flush != profiled_flush) {
    std::cout << "warning: the plan was profiled with --flush-denormal "
              << harmony::common::FlushDenormalName(profiled_flush) << ", this run computes with "
              << harmony::common::FlushDenormalName(flush)
              << ": its time estimates may not hold (denormal floats are slow on many x86 "
                 "cores)\n";
  }
  const std::string cpu = harmony::common::CpuModelName();
  if (!plan->profile().cpu_model().empty() && plan->profile().cpu_model() != cpu) {
    std::cout << "note: the plan was profiled on " << plan->profile().cpu_model()
              << ", this machine is " << cpu << ": its time estimates assume the former\n";
  }
  if (absl::Status s = LoadData(**runtime, {data, token_dtype, seq_len}, false); !s.ok()) {
    return Fail(harmony::common::Annotate(s, "--data"));
  }
  if (!options.recipe.eval_data.empty()) {
    absl::Status s =
        LoadData(**runtime, {options.recipe.eval_data, token_dtype, seq_len}, /*eval=*/true);
    if (!s.ok()) return Fail(harmony::common::Annotate(s, "--eval-data"));
  }

  const auto& config = plan->config();
  const auto& est = plan->estimates();
  const std::string emulated =
      options.emulate_host_link > 0
          ? absl::StrCat(", host link emulated at ",
                         harmony::common::FormatBandwidth(options.emulate_host_link))
          : "";
  std::cout << "training " << model << " with " << plan_path << ": "
            << (config.mode() == harmony::proto::VDP ? "vDP" : "vPP") << ", "
            << config.num_devices() << " of " << devices->ToString() << ", minibatch "
            << config.minibatch() << ", microbatch " << config.forward_microbatch() << "/"
            << config.backward_microbatch() << ", " << optimizer << emulated << ", "
            << device_threads << " intra-op thread(s) per device, denormals "
            << (flush ? "flushed to zero" : "computed")
            << (config.precision() != harmony::proto::BF16 ? ", fp32"
                : config.fp32_gradients()
                    ? ", bf16, gradients fp32 (bf16 weights, autocast, gradients summed in fp32; "
                      "fp32 masters)"
                    : ", bf16 (bf16 weights and gradients, autocast; fp32 masters)")
            << "\n";
  {
    TrainingRecipe shown = options.recipe;
    shown.clip_mode = (*runtime)->clip_mode();
    const size_t without = (*runtime)->no_decay_parameters().size();
    std::cout << "recipe: " << optimizer << " " << DescribeRecipe(options.optimizer, shown)
              << (without > 0 ? absl::StrCat(" (", without, " parameter(s))") : "") << "\n";
    if (!shown.eval_data.empty()) std::cout << "validation: " << DescribeEvaluation(shown) << "\n";
  }
  std::cout << "host store: " << FormatBytes((*runtime)->host_store_bytes()) << " (optimizer state "
            << FormatBytes((*runtime)->optimizer_state_bytes())
            << (options.world.shard_optimizer_state
                    ? absl::StrCat(", this server's shard of ", world_size) : "")
            << ")"
            << "; the plan expects per iteration "
            << FormatBytes(est.swap().weights_in() + est.swap().activations_in() +
                           est.swap().stash_in())
            << " to the devices and "
            << FormatBytes(est.swap().gradients_out() + est.swap().activations_out() +
                           est.swap().stash_out())
            << " back\n";
  // Resume: the state, and the metrics of the iterations before.
  std::vector<std::string> history;
  std::vector<double> compute_per_iteration;  // This run's, for the check against the plan.
  std::vector<harmony::executor::IterationBalance> balance_per_iteration;  // The same.
  std::vector<harmony::executor::LinkLateness> lateness_per_iteration;  // The same.
  int start = 0;
  if (!resume.empty()) {
    // Rank 0 reads the checkpoint and sends it to the others (their servers
    // need not see the file).
    absl::StatusOr<std::string> path = resume;
    std::string bytes;
    absl::Status read = absl::OkStatus();
    if (rank == 0) {
      path = harmony::executor::ResolveCheckpoint(resume);
      if (!path.ok()) {
        read = path.status();
      } else if (world != nullptr) {
        absl::StatusOr<std::string> got = harmony::common::ReadFileToString(*path);
        if (got.ok()) bytes = *std::move(got);
        read = got.status();
      }
    }
    if (world != nullptr) {
      auto shared = harmony::executor::ShareBytes(*world, bytes, 0);
      if (!shared.ok()) return Fail(shared.status());
      if (rank != 0 && shared->empty()) {
        return Fail(absl::FailedPreconditionError(
            "rank 0 could not read the checkpoint to resume from (see its log)"));
      }
      bytes = *std::move(shared);
    }
    if (!read.ok()) return Fail(read);
    // Alone, read from the file as it is parsed (never whole in memory).
    auto checkpoint = world != nullptr ? harmony::executor::ParseCheckpoint(bytes, *path)
                                       : harmony::executor::ReadCheckpoint(*path);
    if (!checkpoint.ok()) return Fail(checkpoint.status());
    if (checkpoint->iteration >= iterations) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          *path, " is at iteration ", checkpoint->iteration, " already; --iterations counts "
          "from the start of training: give more than ", checkpoint->iteration)));
    }
    if (absl::Status s = (*runtime)->Restore(*checkpoint); !s.ok()) {
      return Fail(harmony::common::Annotate(s, absl::StrCat("resuming from ", *path)));
    }
    start = static_cast<int>(checkpoint->iteration);
    history = std::move(checkpoint->metrics);
    std::cout << "resumed from " << *path << " at iteration " << start << " of " << iterations
              << "\n";
  }
  std::ofstream metrics;
  if (!metrics_path.empty()) {
    metrics.open(metrics_path);
    if (!metrics) return Fail(absl::PermissionDeniedError(absl::StrCat("cannot write ", metrics_path)));
    for (const std::string& line : history) metrics << line << "\n";
  }
  std::unique_ptr<harmony::executor::EventWriter> tensorboard;
  if (!tensorboard_dir.empty() && rank == 0) {
    auto created = harmony::executor::EventWriter::Create(tensorboard_dir);
    if (!created.ok()) return Fail(created.status());
    tensorboard = *std::move(created);
    std::cout << "TensorBoard: " << tensorboard->path()
              << " (tensorboard --logdir " << tensorboard_dir << ")\n";
  }
  harmony::executor::CheckpointPolicy policy;
  policy.dir = checkpoint_dir;
  policy.every_iterations = checkpoint_every;
  policy.every_minutes = checkpoint_minutes;
  policy.keep = keep_checkpoints;
  harmony::executor::Checkpointer checkpointer(policy);
  // Ctrl-C or SIGTERM: stop after the iteration under way (a checkpoint
  // then holds it); a second one ends the process at once.
  static std::atomic<bool> stop_requested{false};
  struct sigaction on_stop {};
  on_stop.sa_handler = [](int) { stop_requested = true; };
  on_stop.sa_flags = SA_RESETHAND;
  sigemptyset(&on_stop.sa_mask);
  sigaction(SIGINT, &on_stop, nullptr);
  sigaction(SIGTERM, &on_stop, nullptr);
  // How the background write of a checkpoint went, once it has.
  auto report_written = [&](harmony::executor::IterationMetrics* m) -> absl::Status {
    double write_s = 0;
    const std::string path = checkpointer.last_path();
    absl::Status s = checkpointer.Finish(&write_s);
    if (!s.ok()) return harmony::common::Annotate(s, "writing a checkpoint");
    std::cout << absl::StrFormat("wrote checkpoint %s in %.3f s (in the background)\n", path,
                                 write_s);
    if (m != nullptr) {
      m->checkpoint_written_path = path;
      m->checkpoint_write_s = write_s;
    }
    return absl::OkStatus();
  };
  double seconds = 0;
  int trained = start;
  int clip_iterations = 0, clipped = 0, redone = 0;
  double redo_s = 0;
  for (int i = start; i < iterations; ++i) {
    auto m = (*runtime)->RunIteration();
    if (!m.ok()) {
      return Fail(absl::Status(m.status().code(),
                               absl::StrCat("iteration ", i + 1, ": ", m.status().message())));
    }
    if (world != nullptr) {
      // The world's loss: the mean of the ranks' (equal slices of the global
      // minibatch), as one server with all of it reports.
      absl::StatusOr<double> loss = world->AllReduceMean(m->loss);
      if (!loss.ok()) return Fail(loss.status());
      m->loss = *loss;
    }
    seconds += m->seconds;
    compute_per_iteration.push_back(m->compute_s);
    balance_per_iteration.push_back(harmony::executor::BalanceOf(*m));
    lateness_per_iteration.push_back(harmony::executor::LatenessOf(*m));
    uint64_t peak = 0;
    for (uint64_t p : m->device_peak_bytes) peak = std::max(peak, p);
    const double busy = m->compute_s + m->swap_wait_s;
    std::cout << absl::StrFormat(
        "iter %*d/%d  loss %.4f  %7.1f samples/s%s  to devices %s  to host %s%s  peak %s of %s"
        "  compute %s wait %s%s  optimizer %s  lr %.4g%s\n",
        static_cast<int>(std::to_string(iterations).size()), i + 1, iterations, m->loss,
        m->samples_per_s, m->emulated_link ? " (emulated link)" : "",
        FormatBytes(m->bytes.to_device()), FormatBytes(m->bytes.to_host()),
        m->bytes.peer > 0 ? absl::StrCat("  device to device ", FormatBytes(m->bytes.peer))
                          : std::string(),
        FormatBytes(peak),
        options.devices.capacity > 0 ? FormatBytes(options.devices.capacity) : "its GPU",
        Share(m->compute_s, busy),
        Share(m->swap_wait_s, busy),
        m->peer_wait_s > 0 ? absl::StrCat(" (", Share(m->peer_wait_s, busy), " on other devices)")
                           : std::string(),
        harmony::common::FormatTimeSpan(absl::Seconds(m->optimizer_s)), m->learning_rate,
        m->clipping ? absl::StrFormat("  grad norm %.4g%s", m->grad_norm,
                                      m->clip_coef < 1
                                          ? absl::StrFormat(" clipped x%.3g%s", m->clip_coef,
                                                            m->redone ? absl::StrFormat(
                                                                " (redo %.3f s)", m->redo_s)
                                                                      : "")
                                          : "")
                    : std::string());
    if (options.recipe.EvalDue(i + 1, iterations)) {
      auto eval = (*runtime)->Evaluate(options.recipe.eval_iterations);
      if (!eval.ok()) {
        return Fail(harmony::common::Annotate(eval.status(),
                                              absl::StrCat("evaluating after iteration ", i + 1)));
      }
      m->evaluated = true;
      m->eval = *eval;
      std::cout << absl::StrFormat(
          "eval after iter %d: loss %.4f  (%d minibatches, %d samples, %.2f s, weights in %s)\n",
          i + 1, eval->loss, eval->minibatches, eval->samples, eval->seconds,
          FormatBytes(eval->weights_in));
    }
    if (m->clipping) {
      ++clip_iterations;
      if (m->clip_coef < 1) ++clipped;
      if (m->redone) {
        ++redone;
        redo_s += m->redo_s;
      }
    }
    trained = i + 1;
    if (checkpointer.written()) {
      if (absl::Status s = report_written(&*m); !s.ok()) return Fail(s);
    }
    bool stopping = stop_requested.load();
    bool due = checkpointer.Due(i + 1) ||
               (checkpointer.enabled() && (i + 1 == iterations || stopping));
    if (world != nullptr) {
      // A stop on any rank stops them all, after the same iteration; a
      // checkpoint due on any is taken by all (sharded state is gathered).
      auto any = harmony::executor::AnyRank(*world, stopping);
      if (!any.ok()) return Fail(any.status());
      stopping = *any;
      due = due || (checkpointer.enabled() && stopping);
      any = harmony::executor::AnyRank(*world, due);
      if (!any.ok()) return Fail(any.status());
      due = *any;
    }
    if (due) {
      // Training stalls only while the state is copied; the write overlaps
      // the next iterations. Rank 0 writes the world's.
      if (checkpointer.pending()) {  // One write at a time.
        if (absl::Status s = report_written(&*m); !s.ok()) return Fail(s);
      }
      const auto copy_start = std::chrono::steady_clock::now();
      auto c = (*runtime)->MakeCheckpoint();
      if (!c.ok()) return Fail(c.status());
      c->metrics = history;
      c->metrics.push_back(harmony::executor::MetricsJson(*m));
      m->checkpoint_copy_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count();
      if (rank == 0 && checkpointer.enabled()) {
        m->checkpoint_path = checkpointer.Write(*std::move(c));
        std::cout << absl::StrFormat("checkpoint after iteration %d: %s (training stalled %.3f s "
                                     "copying it)\n",
                                     i + 1, m->checkpoint_path, m->checkpoint_copy_s);
      }
    }
    if (tensorboard != nullptr) {
      if (absl::Status s = tensorboard->AddIteration(*m); !s.ok()) return Fail(s);
    }
    history.push_back(harmony::executor::MetricsJson(*m));
    if (metrics.is_open()) metrics << history.back() << "\n" << std::flush;
    if (stopping) break;
    if (i == start) {
      // The bytes moved against the plan's figures (which count the data
      // with the activations).
      const auto& want = est.swap();
      const auto& got = m->bytes;
      std::vector<std::string> differ;
      auto check = [&](const char* what, uint64_t measured, uint64_t planned) {
        if (measured != planned) {
          differ.push_back(absl::StrCat(what, " ", FormatBytes(measured), " (plan ",
                                        FormatBytes(planned), ")"));
        }
      };
      check("weights in", got.weights_in, want.weights_in());
      check("gradients out", got.gradients_out, want.gradients_out());
      // The plan counts the data and a loss's targets with the activations.
      check("activations and data in", got.activations_in + got.data_in + got.targets_in,
            want.activations_in());
      check("activations out", got.activations_out, want.activations_out());
      check("stash out", got.stash_out, want.stash_out());
      check("stash in", got.stash_in, want.stash_in());
      check("kept activations out", got.kept_out, want.kept_out());
      check("kept activations in", got.kept_in, want.kept_in());
      std::cout << (differ.empty() ? "bytes moved per iteration equal the plan's, kind by kind\n"
                                   : absl::StrCat("bytes moved differ from the plan's: ",
                                                  absl::StrJoin(differ, ", "), "\n"));
    }
  }
  if (checkpointer.pending()) {
    if (absl::Status s = report_written(nullptr); !s.ok()) return Fail(s);
  }
  if (trained < iterations) {
    std::cout << "stopped after iteration " << trained << " of " << iterations;
    if (checkpointer.enabled()) {
      std::cout << "; continue with --resume " << checkpointer.last_path();
    }
    std::cout << "\n";
    return 130;
  }
  std::cout << absl::StrFormat("trained %d iterations in %.2f s\n", iterations - start, seconds);
  std::cout << "peak resident memory: " << FormatBytes(harmony::common::PeakResidentBytes()) << " (host store "
            << FormatBytes((*runtime)->host_store_bytes()) << ")\n";
  if (clip_iterations > 0) {
    std::cout << absl::StrFormat(
        "gradient clipping (%s) fired in %d of %d iterations; %d redid speculative updates, "
        "%.3f s in all\n",
        ClipModeName((*runtime)->clip_mode()), clipped, clip_iterations, redone, redo_s);
  }
  const harmony::executor::ComputeCheck compute = harmony::executor::CheckComputeAgainstPlan(
      compute_per_iteration, est.compute_s(),
      devices->kind == harmony::common::DeviceSpec::Kind::kCuda);
  if (!compute.text.empty()) std::cout << compute.text << "\n";
  const harmony::executor::BalanceCheck balance =
      harmony::executor::CheckDeviceBalance(std::move(balance_per_iteration));
  if (!balance.text.empty()) std::cout << balance.text << "\n";
  const std::string late = CheckLinkLateness(std::move(lateness_per_iteration)).text;
  if (!late.empty()) std::cout << late << "\n";
  if (!out.empty()) {
    if (absl::Status s = (*runtime)->SaveModel(out); !s.ok()) return Fail(s);
    std::cout << "wrote the trained model to " << out << "\n";
  }
  if (!trace_path.empty()) {
    absl::Status s =
        harmony::common::WriteFileAtomically(trace_path, (*runtime)->ChromeTrace());
    if (!s.ok()) return Fail(s);
    std::cout << "wrote the trace to " << trace_path << "\n";
  }
  return 0;
}


}  // namespace harmony::executor
