// harmony-plan profile, decompose and synthesize: what a model is made of
// and how fast its vLayers run.

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/numbers.h"
#include "common/denormals.h"
#include "common/decomposer.h"
#include "common/device_spec.h"
#include "common/loss.h"
#include "common/model_output.h"
#include "common/tensor_file.h"
#include "common/token_file.h"
#include "common/torch_status.h"
#include "common/units.h"
#include "planner/cli.h"
#include "planner/profile/machine.h"
#include "planner/profile/profiler.h"

namespace harmony::planner::cli {

namespace po = boost::program_options;

// "8,16" -> {8, 16}; empty -> {}.
absl::StatusOr<std::vector<int>> ParseMicrobatchList(const std::string& text) {
  std::vector<int> sizes;
  if (text.empty()) return sizes;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int u = 0;
    if (!absl::SimpleAtoi(part, &u) || u < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--microbatches ", text, ": \"", part, "\" is not a size; give samples per "
          "microbatch, comma-separated, e.g. 8,16"));
    }
    sizes.push_back(u);
  }
  return sizes;
}

int ProfileCommand(const std::vector<std::string>& args) {
  std::string token_dtype;
  int64_t seq_len = 0;
  std::string model, sample_path, devices = "cpu:2x512MiB", out, loss = "auto",
              flush_denormal = "on", precision = "fp32", grad_precision, microbatches;
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
       "dict {\"inputs\", \"targets\"}; dimension 0 is the batch (required); or a token "
       "file (.bin, .npy) with --seq-len: its first windows")
      ("token-dtype", po::value(&token_dtype), "uint16 | uint32: a .bin token file's ids")
      ("seq-len", po::value(&seq_len), "T: tokens per sample of a token file")
      ("devices", po::value(&devices)->default_value(devices),
       "cpu:NxSIZE (virtual CPU devices with a hard memory cap); in a CUDA build also "
       "cuda (the GPUs), cuda:N or cuda:NxSIZE (N partitions of SIZE of the GPUs)")
      ("granularity", po::value(&options.granularity)->default_value(0),
       "vLayers: 0 = one per block, N = about N")
      ("split-blocks", po::bool_switch(&options.split_blocks), kSplitBlocksHelp)
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
      ("microbatches", po::value(&microbatches),
       "only these microbatch sizes, e.g. 8,16 (no probing): the sizes a plan uses "
       "(harmony-plan inspect), timed again right before it runs, for harmony-plan "
       "simulate --times-from")
      ("repeats", po::value(&options.repeats)->default_value(3),
       "timing runs per measurement (median reported)")
      ("threads-per-device", po::value(&options.threads_per_device)->default_value(0),
       "intra-op threads each device computes on, as harmony-exec's flag (0: the "
       "host's hardware threads divided among the devices)")
      ("flush-denormal", po::value(&flush_denormal)->default_value(flush_denormal),
       "on | off: denormal floats flushed to zero (FTZ/DAZ) on every thread that "
       "computes, as harmony-exec will")
      ("precision", po::value(&precision)->default_value(precision),
       "fp32 | bf16: profile as the plan will train (bf16: bf16 parameters, autocast "
       "compute; sizes on the devices in bf16, fp32 masters on the host)")
      ("grad-precision", po::value(&grad_precision),
       "with --precision bf16: bf16 (default) | fp32: gradients summed over the microbatches "
       "and returned in fp32")
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
  absl::StatusOr<std::vector<int>> sizes = ParseMicrobatchList(microbatches);
  if (!sizes.ok()) return Fail(sizes.status());
  options.microbatches = *sizes;
  absl::StatusOr<bool> flush = harmony::common::ParseFlushDenormal(flush_denormal);
  if (!flush.ok()) return Fail(flush.status());
  options.flush_denormal = *flush;
  absl::StatusOr<bool> bf16 = ParsePrecisionBf16(precision);
  if (!bf16.ok()) return Fail(bf16.status());
  options.bf16 = *bf16;
  absl::StatusOr<bool> fp32_gradients = ParseGradPrecisionFp32(grad_precision, options.bf16);
  if (!fp32_gradients.ok()) return Fail(fp32_gradients.status());
  options.fp32_gradients = *fp32_gradients;
  absl::StatusOr<harmony::common::LossKind> loss_kind =
      harmony::common::ParseLossKind(loss);
  if (!loss_kind.ok()) return Fail(loss_kind.status());
  options.loss = *loss_kind;
  absl::StatusOr<harmony::common::TrainingData> sample =
      harmony::common::LoadSample(sample_path, token_dtype, seq_len);
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
    // Not a terminal: a line when the microbatch size changes (what is
    // left, in parentheses, aside).
    const std::string key = line.substr(0, line.find(" ("));
    const std::string size = key.substr(key.rfind(' ') + 1);
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
  std::cerr << harmony::planner::BlasCoreHint();
  if (!out.empty()) {
    absl::Status written = harmony::planner::WriteProfileFile(out, *profile);
    if (!written.ok()) return Fail(written);
    std::cout << "wrote " << out << "\n";
  }
  return 0;
}

int DecomposeCommand(const std::vector<std::string>& args) {
  std::string model_path;
  harmony::common::DecomposeOptions options;
  po::options_description flags(
      "Usage: harmony-plan decompose MODEL.pt [--granularity N] [--split-blocks]\n\n"
      "Shows the vLayers of a TorchScript model: scope, graph nodes, weights,\n"
      "where each live-in comes from, and outputs.\n\nFlags");
  std::string sample_path, loss_output;
  flags.add_options()("help,h", "show this help")(
      "granularity", po::value(&options.granularity)->default_value(0),
      "0 = one vLayer per block, N = about N vLayers")(
      "split-blocks", po::bool_switch(&options.split_blocks), kSplitBlocksHelp)(
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

int SynthesizeCommand(const std::vector<std::string>& args) {
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

}  // namespace harmony::planner::cli
