// harmony-plan: the offline planner.
//
//   harmony-plan profile MODEL.pt --sample-input x.pt [--devices cpu:2x512MiB]
//                [--profile-out profile.json] ...
//   harmony-plan decompose MODEL.pt [--granularity N]
//   harmony-plan synthesize --profile p.json --block K --blocks N ...
//
// Each subcommand parses its flags into options, calls the library, and
// maps a Status to an exit code and one line on stderr.

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <ATen/Parallel.h>
#include <torch/script.h>

#include "absl/strings/str_format.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/decomposer.h"
#include "common/device_spec.h"
#include "common/loss.h"
#include "common/model_output.h"
#include "common/tensor_file.h"
#include "common/torch_status.h"
#include "common/units.h"
#include "common/files.h"
#include "common/plan_file.h"
#include "common/status.h"
#include "planner/plan/make_plan.h"
#include "planner/plan/no_fit.h"
#include "planner/plan/plan_builder.h"
#include "planner/profile/profiler.h"
#include "planner/search/cost_model.h"
#include "planner/search/search.h"
#include "planner/sim/simulator.h"

namespace po = boost::program_options;

namespace {

constexpr char kUsage[] =
    "Usage: harmony-plan MODEL.pt --gpus N --device-memory SIZE --minibatch D\n"
    "                    --sample-input x.pt -o plan.pb [flags]   (see --help)\n"
    "       harmony-plan COMMAND ...\n\n"
    "Commands:\n"
    "  inspect plan.pb                        print a plan\n"
    "  simulate plan.pb [--trace t.json]      re-simulate a saved plan\n"
    "  profile MODEL.pt --sample-input x.pt   measure every vLayer on the devices\n"
    "  decompose MODEL.pt                     show how the model splits into vLayers\n"
    "  synthesize --profile p.json ...        scale a profile to a larger model\n\n"
    "Run harmony-plan COMMAND --help for a command's flags.\n";

int Fail(const absl::Status& status) {
  std::cerr << "harmony-plan: " << status.message() << "\n";
  return 1;
}

// The host's physical memory: the cap of devices that measure what a
// vLayer needs when even one sample does not fit the devices asked for.
uint64_t HostMemoryBytes() {
  return static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
         static_cast<uint64_t>(::sysconf(_SC_PAGE_SIZE));
}

// When nothing fits: the vLayer that needs the most, and the smallest
// device memory the search plans at (it searches again at the sizes it
// tries, with progress on the terminal).
std::string NoFitMessage(const harmony::proto::ProfileFile& profile,
                         harmony::planner::MakePlanOptions options, bool tty) {
  absl::StatusOr<harmony::planner::LargestVLayer> layer =
      harmony::planner::FindLargestVLayer(profile);
  if (!layer.ok()) return std::string(layer.status().message());
  absl::StatusOr<uint64_t> smallest = harmony::planner::SmallestDeviceMemory(profile, options);
  if (tty) std::cerr << "\r\033[K";
  if (!smallest.ok() && !absl::IsNotFound(smallest.status())) {
    return absl::StrCat(harmony::planner::DescribeNoFit(*layer, options, 0), " (",
                        smallest.status().message(), ")");
  }
  return harmony::planner::DescribeNoFit(*layer, options, smallest.ok() ? *smallest : 0);
}

// Parses `args` (after the command) with a positional MODEL argument;
// returns 0 to go on, or an exit code.
int Parse(const std::vector<std::string>& args, const po::options_description& flags,
          std::string* model, po::variables_map* vm) {
  po::options_description all;
  all.add(flags);
  if (model != nullptr) all.add_options()("model", po::value(model));
  po::positional_options_description positional;
  if (model != nullptr) positional.add("model", 1);
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(),
              *vm);
    po::notify(*vm);
  } catch (const po::error& e) {
    std::cerr << "harmony-plan: " << e.what() << " (see --help)\n";
    return 2;
  }
  if (vm->count("help")) {
    std::cout << flags << "\n";
    return -1;
  }
  return 0;
}

int Profile(const std::vector<std::string>& args) {
  std::string model, sample_path, devices = "cpu:2x512MiB", out, loss = "auto";
  harmony::planner::ProfilerOptions options;
  po::options_description flags(
      "Usage: harmony-plan profile MODEL.pt --sample-input x.pt [flags]\n\n"
      "Splits the model into vLayers and measures each one, per microbatch size,\n"
      "on the devices given: forward and backward time, peak device memory,\n"
      "weight and activation sizes, CPU optimizer time, copy bandwidth.\n\nFlags");
  // clang-format off
  flags.add_options()
      ("help,h", "show this help")
      ("sample-input", po::value(&sample_path),
       "torch.save file: a tensor, a tuple of tensors, or the training data "
       "dict {\"inputs\", \"targets\"}; dimension 0 is the batch (required)")
      ("devices", po::value(&devices)->default_value(devices),
       "cpu:NxSIZE (virtual CPU devices with a hard memory cap)")
      ("granularity", po::value(&options.granularity)->default_value(0),
       "vLayers: 0 = one per block, N = about N")
      ("optimizer", po::value(&options.optimizer)->default_value("sgd"),
       "sgd | adam | adamw (sizes optimizer state, times the CPU update)")
      ("loss", po::value(&loss)->default_value(loss),
       "auto | cross-entropy | mse, when forward returns logits")
      ("loss-output", po::value(&options.loss_output),
       "when forward returns a tuple, list, dict or NamedTuple: the element to "
       "train on, by index, key or field (default: the first scalar tensor, else "
       "the first tensor)")
      ("max-microbatch", po::value(&options.max_microbatch)->default_value(256),
       "largest microbatch to probe")
      ("repeats", po::value(&options.repeats)->default_value(3),
       "timing runs per measurement (median reported)")
      ("threads-per-device", po::value(&options.threads_per_device)->default_value(0),
       "intra-op threads each device computes on, as harmony-exec's flag (0: the "
       "host's hardware threads divided among the devices)")
      ("profile-out", po::value(&out), "write the profile here (JSON)");
  // clang-format on
  po::variables_map vm;
  if (int rc = Parse(args, flags, &model, &vm); rc != 0) return rc < 0 ? 0 : rc;
  if (model.empty() || sample_path.empty()) {
    std::cerr << "harmony-plan profile: need MODEL.pt and --sample-input (see --help)\n";
    return 2;
  }
  absl::StatusOr<harmony::common::DeviceSpec> spec =
      harmony::common::ParseDeviceSpec(devices);
  if (!spec.ok()) return Fail(spec.status());
  options.devices = *spec;
  absl::StatusOr<harmony::common::LossKind> loss_kind =
      harmony::common::ParseLossKind(loss);
  if (!loss_kind.ok()) return Fail(loss_kind.status());
  options.loss = *loss_kind;
  absl::StatusOr<harmony::common::TrainingData> sample =
      harmony::common::LoadTrainingData(sample_path);
  if (!sample.ok()) return Fail(sample.status());

  const bool tty = ::isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  std::string last_size;
  options.progress = [&](const std::string& line) {
    const double s = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start).count();
    if (tty) {
      std::cerr << "\r\033[K" << absl::StrFormat("[%5.1fs] ", s) << line << std::flush;
      return;
    }
    // Not a terminal: a line when the microbatch size changes.
    const std::string size = line.substr(line.rfind(' ') + 1);
    if (size != last_size) {
      std::cerr << absl::StrFormat("[%5.1fs] ", s) << line << "\n";
      last_size = size;
    }
  };
  absl::StatusOr<harmony::proto::ProfileFile> profile =
      harmony::planner::ProfileModel(model, *sample, options);
  if (tty) std::cerr << "\r\033[K";
  if (!profile.ok()) return Fail(profile.status());
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start).count();
  std::cout << "profiled " << model << " (" << profile->model().decomposition().vlayer_count()
            << " vLayers) on " << spec->ToString() << " in "
            << absl::StrFormat("%.1f s", seconds) << "\n\n"
            << harmony::planner::ProfileSummary(*profile);
  if (!out.empty()) {
    absl::Status written = harmony::planner::WriteProfileFile(out, *profile);
    if (!written.ok()) return Fail(written);
    std::cout << "wrote " << out << "\n";
  }
  return 0;
}

int Decompose(const std::vector<std::string>& args) {
  std::string model_path;
  harmony::common::DecomposeOptions options;
  po::options_description flags(
      "Usage: harmony-plan decompose MODEL.pt [--granularity N]\n\n"
      "Shows the vLayers of a TorchScript model: scope, graph nodes, weights,\n"
      "where each live-in comes from, and outputs.\n\nFlags");
  std::string sample_path, loss_output;
  flags.add_options()("help,h", "show this help")(
      "granularity", po::value(&options.granularity)->default_value(0),
      "0 = one vLayer per block, N = about N vLayers")(
      "sample-input", po::value(&sample_path),
      "torch.save file with a sample input: finds the first scalar tensor of a "
      "tuple, list or dict output (the loss)")(
      "loss-output", po::value(&loss_output),
      "when forward returns a tuple, list, dict or NamedTuple: the element to "
      "train on, by index, key or field")(
      "graphs", "also print each vLayer's graph")(
      "nodes", "also print forward's nodes with the module calls they come from");
  po::variables_map vm;
  if (int rc = Parse(args, flags, &model_path, &vm); rc != 0) return rc < 0 ? 0 : rc;
  if (model_path.empty()) {
    std::cerr << "harmony-plan decompose: need MODEL.pt (see --help)\n";
    return 2;
  }
  absl::StatusOr<torch::jit::Module> model = harmony::common::CallTorch(
      model_path + ": not a TorchScript model (save one with "
                   "torch.jit.script(model).save(path))",
      [&] { return torch::jit::load(model_path); });
  if (!model.ok()) return Fail(model.status());
  model->train(true);
  std::vector<c10::IValue> sample_args;
  if (!sample_path.empty()) {
    auto sample = harmony::common::LoadTrainingData(sample_path);
    if (!sample.ok()) return Fail(sample.status());
    std::vector<std::string> arguments;
    const auto& schema = model->get_method("forward").function().getSchema().arguments();
    for (size_t i = 1; i < schema.size(); ++i) arguments.push_back(schema[i].name());
    absl::Status arranged = harmony::common::ArrangeInputs(arguments, &*sample);
    if (!arranged.ok()) return Fail(arranged);
    auto takes_targets =
        harmony::common::ForwardTakesTargets(arguments, sample->inputs, sample->targets);
    if (!takes_targets.ok()) return Fail(takes_targets.status());
    for (const at::Tensor& t : sample->inputs) sample_args.emplace_back(t.narrow(0, 0, 1));
    if (*takes_targets) {
      for (const at::Tensor& t : sample->targets) sample_args.emplace_back(t.narrow(0, 0, 1));
    }
  }
  auto output = harmony::common::ChooseLossOutput(
      *model, loss_output, sample_path.empty() ? nullptr : &sample_args);
  if (!output.ok()) return Fail(output.status());
  options.output = output->selector;
  if (!output->message.empty()) std::cout << "loss: " << output->message << "\n";
  auto d = harmony::common::Decomposition::Create(*model, options);
  if (!d.ok()) return Fail(d.status());
  if (vm.count("nodes")) {
    for (int i = 0; i < (*d)->num_nodes(); ++i) std::cout << (*d)->NodeText(i) << "\n";
  }
  std::cout << model_path << ": forward("
            << absl::StrJoin((*d)->forward_arguments(), ", ") << ") -> "
            << (*d)->num_vlayers() << " vLayers over " << (*d)->num_nodes()
            << " graph nodes\n";
  std::cout << absl::StrFormat("%-6s %-24s %-11s %10s %-30s %4s %s\n", "vLayer",
                               "scope", "nodes", "params", "inputs from", "outs",
                               "flags");
  for (const auto& v : (*d)->vlayers()) {
    int64_t params = 0;
    for (const std::string& p : v.parameters) {
      auto t = harmony::common::ResolveTensor(*model, p);
      if (t.ok()) params += t->numel();
    }
    std::vector<std::string> from;
    for (const auto& s : v.inputs) {
      from.push_back(s.producer < 0
                         ? (*d)->forward_arguments().at(s.index)
                         : absl::StrCat("v", s.producer, ".", s.index));
    }
    std::string flags_text = std::string(v.uses_rng ? "rng " : "") +
                             (v.updates_buffers ? "buffers" : "");
    std::cout << absl::StrFormat("%-6d %-24s %-11s %10d %-30s %4d %s\n", v.index,
                                 v.scope.empty() ? "-" : v.scope.substr(0, 24),
                                 absl::StrCat(v.node_begin, "-", v.node_end), params,
                                 absl::StrJoin(from, ","), v.num_outputs(), flags_text);
    if (vm.count("graphs")) std::cout << (*d)->GraphText(v.index) << "\n";
  }
  return 0;
}

int Synthesize(const std::vector<std::string>& args) {
  std::string in, out;
  int block = -1, block_count = 1, blocks = 0;
  double width_scale = 1.0, seq_scale = 1.0, compute_scale = 1.0;
  po::options_description flags(
      "Usage: harmony-plan synthesize --profile p.json --block K --blocks N\n"
      "                               [--block-count C] [--width-scale S] --profile-out big.json\n\n"
      "Makes the profile of a model too large to instantiate here: the vLayers\n"
      "before K, N copies of vLayer K (a measured block), then the vLayers\n"
      "after the C measured blocks; S scales the width (weights and compute\n"
      "by S^2, activations by S).\n\nFlags");
  // clang-format off
  flags.add_options()
      ("help,h", "show this help")
      ("profile", po::value(&in), "measured profile (required)")
      ("block", po::value(&block), "vLayer index of one block (required)")
      ("block-count", po::value(&block_count)->default_value(1),
       "how many block vLayers the measured model has, from --block on "
       "(their median times are the copies')")
      ("blocks", po::value(&blocks), "blocks in the synthesized model (required)")
      ("width-scale", po::value(&width_scale)->default_value(1.0),
       "width of the synthesized model over the measured one")
      ("seq-scale", po::value(&seq_scale)->default_value(1.0),
       "sequence length of the synthesized model over the measured one")
      ("compute-scale", po::value(&compute_scale)->default_value(1.0),
       "multiplies every device time: e.g. 0.001 to plan for devices 1000x "
       "faster than the one profiled")
      ("profile-out", po::value(&out), "where to write it (required)");
  // clang-format on
  po::variables_map vm;
  if (int rc = Parse(args, flags, nullptr, &vm); rc != 0) return rc < 0 ? 0 : rc;
  if (in.empty() || out.empty() || block < 0 || blocks < 1) {
    std::cerr << "harmony-plan synthesize: need --profile, --block, --blocks and "
                 "--profile-out (see --help)\n";
    return 2;
  }
  auto base = harmony::planner::ReadProfileFile(in);
  if (!base.ok()) return Fail(base.status());
  auto big = harmony::planner::SynthesizeProfile(*base, block, block_count, blocks,
                                                 width_scale, seq_scale, compute_scale);
  if (!big.ok()) return Fail(big.status());
  absl::Status written = harmony::planner::WriteProfileFile(out, *big);
  if (!written.ok()) return Fail(written);
  uint64_t params = 0;
  for (const auto& v : big->profile().vlayers()) params += v.parameter_bytes();
  std::cout << "wrote " << out << ": " << big->profile().vlayers_size() << " vLayers, "
            << harmony::common::FormatBytes(params) << " of parameters\n";
  return 0;
}

// --host-link: a bandwidth, or 0 (the profile's own) when not given.
absl::StatusOr<double> ParseHostLink(const std::string& text) {
  if (text.empty()) return 0.0;
  return harmony::common::ParseBandwidth(text);
}

// --host-link-latency in seconds; -1 (the profile's) when not given.
absl::StatusOr<double> ParseHostLinkLatency(const std::string& text) {
  if (text.empty()) return -1.0;
  absl::StatusOr<absl::Duration> latency = harmony::common::ParseDuration(text);
  if (!latency.ok()) return latency.status();
  return absl::ToDoubleSeconds(*latency);
}

// "0-3,4-7,8-11" -> packs.
// auto (empty: the planner decides), yes or no.
absl::StatusOr<std::optional<bool>> ParseAutoYesNo(const std::string& flag,
                                                   const std::string& text) {
  if (text == "yes") return std::optional<bool>(true);
  if (text == "no") return std::optional<bool>(false);
  if (text == "auto") return std::optional<bool>();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " \"", text, "\": expected auto, yes or no"));
}

absl::StatusOr<harmony::planner::Packing> ParsePacks(const std::string& text) {
  harmony::planner::Packing packs;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<std::string> ends = absl::StrSplit(part, '-');
    int first = 0, last = 0;
    if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], &first) ||
        !absl::SimpleAtoi(ends[1], &last) || first < 0 || last < first) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--packs \"", text, "\": expected vLayer ranges such as 0-3,4-7,8-11"));
    }
    packs.push_back({first, last + 1});
  }
  return packs;
}

int Plan(const std::vector<std::string>& args) {
  std::string model, sample_path, profile_path, out, json_out, trace, memory_text,
      mode = "auto", schedule = "harmony", local_text = "auto", peer_text = "auto", packs_text,
      host_link_text, host_latency_text, network_text = "1.25GB/s",
      latency_text = "50us";
  int gpus = 0, minibatch = 0, microbatch = 0, granularity = 0, threads_per_device = 0,
      servers = 1, global_minibatch = 0;
  double tolerance = 0.05, reserve = 0.1;
  std::string optimizer = "sgd", loss = "auto", loss_output;
  po::options_description flags(
      "Usage: harmony-plan MODEL.pt --gpus N --device-memory SIZE --minibatch D\n"
      "                    --sample-input x.pt -o plan.pb [flags]\n"
      "       harmony-plan --profile p.json --gpus N ... -o plan.pb\n\n"
      "Profiles the model (or reads --profile), searches the schedule (mode,\n"
      "microbatch sizes, packs) under the device memory, simulates it, and\n"
      "writes the plan harmony-exec runs.\n\nFlags");
  // clang-format off
  flags.add_options()
      ("help,h", "show this help")
      ("gpus", po::value(&gpus), "devices to plan for (required)")
      ("device-memory", po::value(&memory_text),
       "memory of each device, e.g. 11GiB (required)")
      ("minibatch", po::value(&minibatch),
       "samples per iteration (required; with --servers, each server's)")
      ("global-minibatch", po::value(&global_minibatch),
       "with --servers: the world's minibatch instead, divided among the servers")
      ("sample-input", po::value(&sample_path),
       "torch.save file with a sample input (to profile the model)")
      ("profile", po::value(&profile_path),
       "use this profile (harmony-plan profile / synthesize) instead of profiling")
      ("output,o", po::value(&out), "plan file to write (required)")
      ("json", po::value(&json_out), "also write the plan as JSON")
      ("trace", po::value(&trace), "write a Chrome trace of one simulated iteration")
      ("mode", po::value(&mode)->default_value(mode), "auto | vpp | vdp")
      ("schedule", po::value(&schedule)->default_value(schedule),
       "harmony | ondemand | gpipe | dp-swap (baselines, for comparison)")
      ("microbatch", po::value(&microbatch)->default_value(0),
       "pin the microbatch size (forward and backward); 0 searches")
      ("packs", po::value(&packs_text), "pin the backward packs, e.g. 0-3,4-7,8-11")
      ("local-activations", po::value(&local_text)->default_value(local_text),
       "auto | yes | no: in vDP, keep activations (and their gradients) between a "
       "device's packs on the device instead of sending them through the host; auto "
       "tries both")
      ("peer-weights", po::value(&peer_text)->default_value(peer_text),
       "auto | yes | no: in vDP on several devices, device 0 swaps each pack's "
       "parameters in and the other devices copy them from it, so they cross the host "
       "link once; auto: yes when devices copy between them at least as fast as from "
       "the host")
      ("memory-reserve", po::value(&reserve)->default_value(0.1),
       "fraction of each device's memory the plan leaves free for what the "
       "profile does not see (allocator slack, runtime buffers)")
      ("time-tolerance", po::value(&tolerance)->default_value(0.05),
       "simulated times within this fraction of the fastest count as equal; "
       "among them the plan moving fewer bytes wins")
      ("host-link-latency", po::value(&host_latency_text),
       "fixed cost of each host transfer on top of its bytes, e.g. 100us (default: the "
       "profile's measured hand-off; with harmony-exec --emulate-host-link, the emulated "
       "copy's sleep also overshoots: harmony-plan profile prints it)")
      ("host-link", po::value(&host_link_text),
       "host<->device bandwidth shared by the devices, e.g. 12GB/s (default: "
       "the profile's measurement)")
      ("servers", po::value(&servers)->default_value(1),
       "servers training together, data parallel, each with --gpus devices and "
       "--minibatch samples of a servers x minibatch global one (harmony-exec run "
       "--world-size, harmony-ctl submit --world): the prediction includes summing the "
       "gradients across them")
      ("network", po::value(&network_text)->default_value(network_text),
       "with --servers: each server's network bandwidth (1.25GB/s = 10 Gb/s)")
      ("network-latency", po::value(&latency_text)->default_value(latency_text),
       "with --servers: one message's latency")
      ("shard-optimizer-state",
       "with --servers: each server keeps 1/servers of the optimizer state (ZeRO-1)")
      ("granularity", po::value(&granularity)->default_value(0),
       "vLayers when profiling: 0 = one per block, N = about N")
      ("threads-per-device", po::value(&threads_per_device)->default_value(0),
       "intra-op threads each device computes on when profiling, as "
       "harmony-exec's flag (0: the host's hardware threads divided among the "
       "devices)")
      ("optimizer", po::value(&optimizer)->default_value(optimizer),
       "sgd | adam | adamw, when profiling")
      ("loss", po::value(&loss)->default_value(loss),
       "auto | cross-entropy | mse, when forward returns logits (when profiling)")
      ("loss-output", po::value(&loss_output),
       "when forward returns a tuple, list, dict or NamedTuple: the element to "
       "train on, by index, key or field (default: the first scalar tensor, else "
       "the first tensor; when profiling)");
  // clang-format on
  po::variables_map vm;
  if (int rc = Parse(args, flags, &model, &vm); rc != 0) return rc < 0 ? 0 : rc;
  if (gpus < 1 || memory_text.empty() || out.empty()) {
    std::cerr << "harmony-plan: need --gpus, --device-memory and -o (see --help)\n";
    return 2;
  }
  if (global_minibatch > 0) {
    if (minibatch > 0) {
      std::cerr << "harmony-plan: give --minibatch (each server's) or --global-minibatch, not "
                   "both\n";
      return 2;
    }
    const int s = std::max(1, servers);
    if (global_minibatch % s != 0) {
      const int below = std::max(s, global_minibatch / s * s);
      std::cerr << "harmony-plan: --global-minibatch " << global_minibatch
                << " does not divide among " << s << " servers (--servers): each server "
                << "trains an equal slice; try " << below << " or " << below + s << "\n";
      return 2;
    }
    minibatch = global_minibatch / s;
  }
  if (minibatch < 1) {
    std::cerr << "harmony-plan: --minibatch is required (samples per iteration, at "
                 "least 1)\n";
    return 2;
  }
  absl::StatusOr<uint64_t> memory = harmony::common::ParseBytes(memory_text);
  if (!memory.ok()) return Fail(memory.status());
  const bool tty = ::isatty(STDERR_FILENO);
  auto progress = [&](const std::string& line) {
    if (tty) {
      std::cerr << "\r\033[K" << line << std::flush;
    } else {
      std::cerr << line << "\n";
    }
  };

  harmony::proto::ProfileFile profile;
  bool no_fit_only = false;  // Profiled without the cap: only to say what fits.
  if (!profile_path.empty()) {
    auto read = harmony::planner::ReadProfileFile(profile_path);
    if (!read.ok()) return Fail(read.status());
    profile = *std::move(read);
    if (!model.empty() && !profile.model().sha256().empty()) {
      auto sha = harmony::common::Sha256OfFile(model);
      if (!sha.ok()) return Fail(sha.status());
      if (*sha != profile.model().sha256()) {
        return Fail(absl::FailedPreconditionError(absl::StrCat(
            profile_path, " profiles another model (sha256 ", profile.model().sha256(),
            ", ", model, " has ", *sha, ")")));
      }
    }
  } else {
    if (model.empty() || sample_path.empty()) {
      std::cerr << "harmony-plan: need MODEL.pt and --sample-input to profile, or "
                   "--profile (see --help)\n";
      return 2;
    }
    auto sample = harmony::common::LoadTrainingData(sample_path);
    if (!sample.ok()) return Fail(sample.status());
    harmony::planner::ProfilerOptions options;
    options.devices.count = gpus;
    options.devices.capacity = *memory;
    options.granularity = granularity;
    options.threads_per_device = threads_per_device;
    options.optimizer = optimizer;
    absl::StatusOr<harmony::common::LossKind> loss_kind = harmony::common::ParseLossKind(loss);
    if (!loss_kind.ok()) return Fail(loss_kind.status());
    options.loss = *loss_kind;
    options.loss_output = loss_output;
    options.max_microbatch = minibatch;
    options.progress = progress;
    auto measured = harmony::planner::ProfileModel(model, *sample, options);
    if (tty) std::cerr << "\r\033[K";
    if (absl::IsResourceExhausted(measured.status())) {
      // Even one sample does not fit: measure microbatch 1 on devices as
      // large as the host, to say which vLayer and what memory would do.
      std::cerr << "harmony-plan: " << measured.status().message()
                << "\nharmony-plan: measuring microbatch 1 without the cap to say what fits\n";
      options.devices.capacity = HostMemoryBytes();
      options.max_microbatch = 1;
      options.repeats = 1;
      measured = harmony::planner::ProfileModel(model, *sample, options);
      if (tty) std::cerr << "\r\033[K";
      if (!measured.ok()) return Fail(measured.status());
      measured->mutable_profile()->set_device_memory_bytes(*memory);
      no_fit_only = true;
    }
    if (!measured.ok()) return Fail(measured.status());
    profile = *std::move(measured);
    std::cerr << harmony::planner::GemmWarning(profile.profile().gemm_flop_per_s(),
                                               static_cast<int>(profile.profile().host_threads()));
  }
  absl::StatusOr<double> host_link = ParseHostLink(host_link_text);
  if (!host_link.ok()) return Fail(host_link.status());
  harmony::planner::MakePlanOptions options;
  options.num_devices = gpus;
  options.device_memory = *memory;
  options.memory_reserve = reserve;
  options.minibatch = minibatch;
  options.microbatch = microbatch;
  options.time_tolerance = tolerance;
  options.host_link = *host_link;
  absl::StatusOr<double> host_latency = ParseHostLinkLatency(host_latency_text);
  if (!host_latency.ok()) return Fail(host_latency.status());
  options.host_link_latency = *host_latency;
  options.progress = progress;
  if (servers < 1) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--servers ", servers, ": at least 1")));
  }
  options.network.servers = servers;
  if (servers > 1) {
    auto network = harmony::common::ParseBandwidth(network_text);
    if (!network.ok()) return Fail(network.status());
    auto latency = harmony::common::ParseDuration(latency_text);
    if (!latency.ok()) return Fail(latency.status());
    options.network.bytes_per_s = *network;
    options.network.latency_s = absl::ToDoubleSeconds(*latency);
    options.network.shard_optimizer_state = vm.count("shard-optimizer-state") > 0;
  }
  if (mode == "vpp") {
    options.mode = harmony::planner::Mode::kVpp;
  } else if (mode == "vdp") {
    options.mode = harmony::planner::Mode::kVdp;
  } else if (mode != "auto") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--mode \"", mode, "\": expected auto, vpp or vdp")));
  }
  auto local = ParseAutoYesNo("--local-activations", local_text);
  if (!local.ok()) return Fail(local.status());
  options.local_activations = *local;
  auto peer = ParseAutoYesNo("--peer-weights", peer_text);
  if (!peer.ok()) return Fail(peer.status());
  options.peer_weights = *peer;
  if (!packs_text.empty()) {
    auto packs = ParsePacks(packs_text);
    if (!packs.ok()) return Fail(packs.status());
    options.backward_packs = *packs;
  }
  if (schedule == "ondemand") {
    options.schedule = harmony::planner::Schedule::kOndemand;
  } else if (schedule == "gpipe") {
    options.schedule = harmony::planner::Schedule::kGpipe;
  } else if (schedule == "dp-swap") {
    options.schedule = harmony::planner::Schedule::kDpSwap;
  } else if (schedule != "harmony") {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--schedule \"", schedule, "\": expected harmony, ondemand, gpipe or dp-swap")));
  }
  auto made = no_fit_only ? absl::StatusOr<harmony::planner::MadePlan>(
                                absl::ResourceExhaustedError("does not fit"))
                          : harmony::planner::MakePlan(profile, options);
  if (tty) std::cerr << "\r\033[K";
  if (absl::IsResourceExhausted(made.status()) &&
      options.schedule == harmony::planner::Schedule::kHarmony) {
    return Fail(absl::ResourceExhaustedError(NoFitMessage(profile, options, tty)));
  }
  if (!made.ok()) return Fail(made.status());
  const harmony::planner::SearchResult& result = made->result;
  const harmony::proto::Plan& plan = made->plan;
  if (!result.sim.fits) {
    std::cerr << "harmony-plan: warning: the " << schedule
              << " schedule does not fit the device memory at microbatch "
              << std::max(1, microbatch) << " (see the peaks below)\n";
  }
  absl::Status written = harmony::common::WritePlanFile(out, plan);
  if (!written.ok()) return Fail(written);
  if (!json_out.empty()) {
    written = harmony::common::WritePlanJson(json_out, plan);
    if (!written.ok()) return Fail(written);
  }
  if (!trace.empty()) {
    auto sim = harmony::planner::Simulate(*made->cost, result.graph, /*keep_events=*/true);
    if (!sim.ok()) return Fail(sim.status());
    written = harmony::common::WriteFileAtomically(trace, harmony::planner::ChromeTrace(*sim));
    if (!written.ok()) return Fail(written);
  }
  const double seconds = made->search_seconds;
  std::cout << "searched " << result.candidates << " configurations (" << result.feasible
            << " fit) in " << absl::StrFormat("%.1f s", seconds) << "\n"
            << harmony::planner::PlanSummary(plan);
  for (size_t d = 0; d < result.sim.busy.size(); ++d) {
    const auto& busy = result.sim.busy[d];
    std::cout << absl::StrFormat(
        "  device %d busy: compute %.1f%%, weights-in %.1f%%, swap-in %.1f%%, swap-out %.1f%%, "
        "peer %.1f%%\n",
        d, 100 * busy[harmony::planner::kCompute] / result.sim.iteration_s,
        100 * busy[harmony::planner::kWeightsIn] / result.sim.iteration_s,
        100 * busy[harmony::planner::kSwapIn] / result.sim.iteration_s,
        100 * busy[harmony::planner::kSwapOut] / result.sim.iteration_s,
        100 * busy[harmony::planner::kPeer] / result.sim.iteration_s);
  }
  std::cout << absl::StrFormat("  host CPU optimizer busy: %.1f%%\n",
                               100 * result.sim.optimizer_busy_s / result.sim.iteration_s)
            << "wrote " << out;
  if (!json_out.empty()) std::cout << ", " << json_out;
  if (!trace.empty()) std::cout << ", " << trace;
  std::cout << "\n";
  return 0;
}

int SimulatePlan(const std::vector<std::string>& args) {
  std::string path, trace, host_link_text, host_latency_text;
  po::options_description flags(
      "Usage: harmony-plan simulate plan.pb [--trace t.json] [--host-link BW]\n\n"
      "Re-simulates a saved plan from the profile it carries: validates its task\n"
      "graph and prints the predicted iteration, on the host link the plan was made\n"
      "for (its --host-link and --host-link-latency, else the profile's) or another.\n\nFlags");
  flags.add_options()("help,h", "show this help")(
      "trace", po::value(&trace), "write a Chrome trace of the iteration")(
      "host-link", po::value(&host_link_text),
      "host<->device bandwidth, e.g. 12GB/s (default: the plan's)")(
      "host-link-latency", po::value(&host_latency_text),
      "fixed cost of each host transfer, e.g. 100us (default: the plan's)");
  po::variables_map vm;
  if (int rc = Parse(args, flags, &path, &vm); rc != 0) return rc < 0 ? 0 : rc;
  if (path.empty()) {
    std::cerr << "harmony-plan simulate: need plan.pb (see --help)\n";
    return 2;
  }
  auto plan = harmony::common::ReadPlanFile(path);
  if (!plan.ok()) return Fail(plan.status());
  absl::StatusOr<double> host_link = ParseHostLink(host_link_text);
  if (!host_link.ok()) return Fail(host_link.status());
  if (host_link_text.empty()) host_link = plan->config().host_link_bytes_per_s();
  harmony::planner::NetworkModel network;  // The world the plan is for.
  if (plan->config().servers() > 1) {
    network.servers = static_cast<int>(plan->config().servers());
    network.bytes_per_s = plan->config().network_bytes_per_s();
    network.latency_s = plan->config().network_latency_s();
    network.shard_optimizer_state = plan->config().shard_optimizer_state();
  }
  absl::StatusOr<double> host_latency = ParseHostLinkLatency(host_latency_text);
  if (!host_latency.ok()) return Fail(host_latency.status());
  if (host_latency_text.empty() && plan->config().has_host_link_latency_s()) {
    host_latency = plan->config().host_link_latency_s();
  }
  auto cost = harmony::planner::CostModel::Create(harmony::planner::ProfileOfPlan(*plan),
                                                  *host_link, network, *host_latency);
  if (!cost.ok()) return Fail(cost.status());
  auto graph = harmony::planner::TaskGraphFromPlan(*plan);
  if (!graph.ok()) return Fail(graph.status());
  absl::Status valid = harmony::planner::ValidateTaskGraph(**cost, *graph);
  if (!valid.ok()) return Fail(harmony::common::Annotate(valid, path));
  auto sim = harmony::planner::Simulate(**cost, *graph, !trace.empty());
  if (!sim.ok()) return Fail(sim.status());
  std::cout << absl::StrFormat(
      "%s: iteration %s (%.2f samples/s), %s over the host link, peaks", path,
      harmony::common::FormatTimeSpan(absl::Seconds(sim->iteration_s)),
      graph->config.minibatch / sim->iteration_s,
      harmony::common::FormatBytes(sim->swap.host_link()));
  for (uint64_t p : sim->device_peak) std::cout << " " << harmony::common::FormatBytes(p);
  std::cout << (sim->fits ? "" : " (over the device memory)") << "\n";
  if (!trace.empty()) {
    absl::Status written =
        harmony::common::WriteFileAtomically(trace, harmony::planner::ChromeTrace(*sim));
    if (!written.ok()) return Fail(written);
    std::cout << "wrote " << trace << "\n";
  }
  return 0;
}

int Inspect(const std::vector<std::string>& args) {
  std::string path;
  po::options_description flags(
      "Usage: harmony-plan inspect plan.pb [--tasks]\n\n"
      "Prints a plan: configuration, estimates, and with --tasks every\n"
      "device's task list.\n\nFlags");
  flags.add_options()("help,h", "show this help")("tasks", "list every task");
  po::variables_map vm;
  if (int rc = Parse(args, flags, &path, &vm); rc != 0) return rc < 0 ? 0 : rc;
  if (path.empty()) {
    std::cerr << "harmony-plan inspect: need plan.pb (see --help)\n";
    return 2;
  }
  auto plan = harmony::common::ReadPlanFile(path);
  if (!plan.ok()) return Fail(plan.status());
  std::cout << harmony::planner::PlanSummary(*plan);
  if (vm.count("tasks")) std::cout << harmony::planner::PlanTasks(*plan);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Profiles time each device on its share of the cores, as harmony-exec
  // computes it (the profile records how many threads; harmony-exec says when
  // it runs on another count).
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "profile") return Profile(args);
  if (command == "inspect") return Inspect(args);
  if (command == "simulate") return SimulatePlan(args);
  if (command == "decompose") return Decompose(args);
  if (command == "synthesize") return Synthesize(args);
  if (command.rfind("-", 0) == 0 || command.size() > 3 &&
                                        command.substr(command.size() - 3) == ".pt") {
    args.insert(args.begin(), command);
    return Plan(args);
  }
  std::cerr << "harmony-plan: \"" << command
            << "\" is not a command or a model file (MODEL.pt). Commands: inspect, simulate, "
               "profile, decompose, synthesize (see --help)\n";
  return 2;
}
