// harmony-plan MODEL.pt ...: profile (or read a profile), search the
// schedule under the devices' memory, simulate it and write the plan.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/denormals.h"
#include "common/files.h"
#include "common/loss.h"
#include "common/plan_file.h"
#include "common/status.h"
#include "common/tensor_file.h"
#include "common/token_file.h"
#include "common/units.h"
#include "planner/cli.h"
#include "planner/plan/make_plan.h"
#include "planner/plan/no_fit.h"
#include "planner/plan/plan_builder.h"
#include "planner/profile/machine.h"
#include "planner/profile/model_identity.h"
#include "planner/profile/profiler.h"
#include "planner/sim/simulator.h"

namespace harmony::planner::cli {
namespace {

namespace po = boost::program_options;

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

// auto (empty: the planner decides), yes or no.
absl::StatusOr<std::optional<bool>> ParseAutoYesNo(const std::string& flag,
                                                   const std::string& text) {
  if (text == "yes") return std::optional<bool>(true);
  if (text == "no") return std::optional<bool>(false);
  if (text == "auto") return std::optional<bool>();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " \"", text, "\": expected auto, yes or no"));
}

// "0-3,4-7,8-11" -> packs.
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

// The plan command's flags.
struct PlanFlags {
  std::string model, sample_path, profile_path, out, json_out, trace, memory_text,
      mode = "auto", schedule = "harmony", local_text = "auto", peer_text = "auto", keep_text = "auto", packs_text,
      host_link_text, host_latency_text, network_text = "1.25GB/s", latency_text = "50us",
      flush_denormal = "on", token_dtype, precision, grad_precision;
  int64_t seq_len = 0;
  int gpus = 0, minibatch = 0, microbatch = 0, granularity = 0, threads_per_device = 0,
      servers = 1, global_minibatch = 0, waves = 0;
  bool split_blocks = false;
  double tolerance = 0.05, reserve = 0.1;
  std::string optimizer = "sgd", loss = "auto", loss_output;
};

std::unique_ptr<po::options_description> PlanFlagsDescription(PlanFlags* f) {
  auto flags = std::make_unique<po::options_description>(
      "Usage: harmony-plan MODEL.pt --gpus N --device-memory SIZE --minibatch D\n"
      "                    --sample-input x.pt -o plan.pb [flags]\n"
      "       harmony-plan --profile p.json --gpus N ... -o plan.pb\n\n"
      "Profiles the model (or reads --profile), searches the schedule (mode,\n"
      "microbatch sizes, packs) under the device memory, simulates it, and\n"
      "writes the plan harmony-exec runs.\n\nFlags");
  // clang-format off
  flags->add_options()
      ("help,h", "show this help")
      ("gpus", po::value(&f->gpus), "devices to plan for (required)")
      ("device-memory", po::value(&f->memory_text),
       "memory of each device, e.g. 11GiB (required)")
      ("minibatch", po::value(&f->minibatch),
       "samples per iteration (required; with --servers, each server's)")
      ("global-minibatch", po::value(&f->global_minibatch),
       "with --servers: the world's minibatch instead, divided among the servers")
      ("sample-input", po::value(&f->sample_path),
       "torch.save file with a sample input (to profile the model), or a token file "
       "(.bin, .npy) with --seq-len (and --token-dtype for .bin): its first windows")
      ("token-dtype", po::value(&f->token_dtype), "uint16 | uint32: a .bin token file's ids")
      ("seq-len", po::value(&f->seq_len), "T: tokens per sample of a token file")
      ("profile", po::value(&f->profile_path),
       "use this profile (harmony-plan profile / synthesize) instead of profiling")
      ("output,o", po::value(&f->out), "plan file to write (required)")
      ("json", po::value(&f->json_out), "also write the plan as JSON")
      ("trace", po::value(&f->trace), "write a Chrome trace of one simulated iteration")
      ("mode", po::value(&f->mode)->default_value(f->mode), "auto | vpp | vdp")
      ("schedule", po::value(&f->schedule)->default_value(f->schedule),
       "harmony | ondemand | gpipe | dp-swap (baselines, for comparison)")
      ("microbatch", po::value(&f->microbatch)->default_value(f->microbatch),
       "pin the microbatch size (forward and backward); 0 searches")
      ("packs", po::value(&f->packs_text), "pin the backward packs, e.g. 0-3,4-7,8-11")
      ("local-activations", po::value(&f->local_text)->default_value(f->local_text),
       "auto | yes | no: in vDP, keep activations (and their gradients) between a "
       "device's packs on the device instead of sending them through the host; auto "
       "tries both")
      ("keep-activations", po::value(&f->keep_text)->default_value(f->keep_text),
       "auto | all | none: whether a backward pack keeps the activations its forward "
       "saved (sent to the host and back) instead of recomputing its forward from the "
       "stash; auto tries every candidate both ways, then chooses per pack on the best "
       "(keeping where it is faster), all keeps in every pack that can (its vLayers "
       "in one forward pack, equal forward and backward microbatches)")
      ("waves", po::value(&f->waves)->default_value(f->waves),
       "vDP: run the minibatch as N passes over the packs, each on 1/N of the samples, "
       "the gradients summed on the host and one update after the last: what a device "
       "keeps between its packs is one pass's (weights swap in once per pass); 0: one "
       "pass, and more where keeping activations on the devices needs them")
      ("peer-weights", po::value(&f->peer_text)->default_value(f->peer_text),
       "auto | yes | no: in vDP on several devices, device 0 swaps each pack's "
       "parameters in and the other devices copy them from it, so they cross the host "
       "link once; auto: yes when devices copy between them at least as fast as from "
       "the host")
      ("memory-reserve", po::value(&f->reserve)->default_value(f->reserve),
       "fraction of each device's memory the plan leaves free for what the "
       "profile does not see (allocator slack, runtime buffers)")
      ("time-tolerance", po::value(&f->tolerance)->default_value(f->tolerance),
       "simulated times within this fraction of the fastest are traded against "
       "bytes over the host link at par: the least time x bytes wins")
      ("host-link-latency", po::value(&f->host_latency_text),
       "fixed cost of each host transfer on top of its bytes, e.g. 100us (default: the "
       "profile's measured hand-off; with harmony-exec --emulate-host-link, the emulated "
       "copy's sleep also overshoots: harmony-plan profile prints it)")
      ("host-link", po::value(&f->host_link_text),
       "host<->device bandwidth shared by the devices, e.g. 12GB/s (default: "
       "the profile's measurement)")
      ("servers", po::value(&f->servers)->default_value(f->servers),
       "servers training together, data parallel, each with --gpus devices and "
       "--minibatch samples of a servers x minibatch global one (harmony-exec run "
       "--world-size, harmony-ctl submit --world): the prediction includes summing the "
       "gradients across them")
      ("network", po::value(&f->network_text)->default_value(f->network_text),
       "with --servers: each server's network bandwidth (1.25GB/s = 10 Gb/s)")
      ("network-latency", po::value(&f->latency_text)->default_value(f->latency_text),
       "with --servers: one message's latency")
      ("shard-optimizer-state",
       "with --servers: each server keeps 1/servers of the optimizer state (ZeRO-1)")
      ("granularity", po::value(&f->granularity)->default_value(f->granularity),
       "vLayers when profiling: 0 = one per block, N = about N")
      ("split-blocks", po::bool_switch(&f->split_blocks), kSplitBlocksHelp)
      ("threads-per-device", po::value(&f->threads_per_device)->default_value(f->threads_per_device),
       "intra-op threads each device computes on when profiling, as "
       "harmony-exec's flag (0: the host's hardware threads divided among the "
       "devices)")
      ("flush-denormal", po::value(&f->flush_denormal)->default_value(f->flush_denormal),
       "on | off: denormal floats flushed to zero (FTZ/DAZ) when profiling; recorded in "
       "the plan, and harmony-exec computes so too (see the README's \"Denormal numbers\")")
      ("optimizer", po::value(&f->optimizer)->default_value(f->optimizer),
       "sgd | adam | adamw, when profiling")
      ("precision", po::value(&f->precision),
       "fp32 | bf16: what the plan trains in (default fp32; with --profile, the "
       "profile's). bf16: bf16 weights and gradients on the devices and the host link, "
       "compute under autocast, fp32 master weights and optimizer on the host")
      ("grad-precision", po::value(&f->grad_precision),
       "with --precision bf16: bf16 (default; gradients summed in bf16 as a bf16 .grad is) | "
       "fp32 (summed over the microbatches and returned in fp32: twice the gradient bytes)")
      ("loss", po::value(&f->loss)->default_value(f->loss),
       "auto | cross-entropy | mse, when forward returns logits (when profiling)")
      ("loss-output", po::value(&f->loss_output),
       "when forward returns a tuple, list, dict or NamedTuple: the element to "
       "train on, by index, key or field (default: the first scalar tensor, else "
       "the first tensor; when profiling)");
  // clang-format on
  return flags;
}

// Checks the flags that must be given together; resolves
// --global-minibatch into f->minibatch. Returns 0, or 2 after a usage error.
int CheckPlanFlags(PlanFlags* f) {
  if (f->gpus < 1 || f->memory_text.empty() || f->out.empty()) {
    std::cerr << "harmony-plan: need --gpus, --device-memory and -o (see --help)\n";
    return 2;
  }
  if (f->global_minibatch > 0) {
    if (f->minibatch > 0) {
      std::cerr << "harmony-plan: give --minibatch (each server's) or --global-minibatch, not "
                   "both\n";
      return 2;
    }
    const int s = std::max(1, f->servers);
    if (f->global_minibatch % s != 0) {
      const int below = std::max(s, f->global_minibatch / s * s);
      std::cerr << "harmony-plan: --global-minibatch " << f->global_minibatch
                << " does not divide among " << s << " servers (--servers): each server "
                << "trains an equal slice; try " << below << " or " << below + s << "\n";
      return 2;
    }
    f->minibatch = f->global_minibatch / s;
  }
  if (f->minibatch < 1) {
    std::cerr << "harmony-plan: --minibatch is required (samples per iteration, at "
                 "least 1)\n";
    return 2;
  }
  if (f->profile_path.empty() && (f->model.empty() || f->sample_path.empty())) {
    std::cerr << "harmony-plan: need MODEL.pt and --sample-input to profile, or "
                 "--profile (see --help)\n";
    return 2;
  }
  // A profile's cuts are fixed: the flags that choose cuts would be ignored.
  if (!f->profile_path.empty() && (f->granularity > 0 || f->split_blocks)) {
    const std::string flag = f->split_blocks ? "--split-blocks"
                                             : absl::StrCat("--granularity ", f->granularity);
    std::cerr << "harmony-plan: " << flag << " chooses the cuts, and " << f->profile_path
              << " (--profile) was profiled at its own: profile again with harmony-plan "
                 "profile ... "
              << flag << " --profile-out P.json and plan from that, or leave " << flag
              << " out\n";
    return 2;
  }
  return 0;
}

// The profile to plan from: read (--profile; it must be of MODEL.pt when
// that is given too) or measured on devices of `memory` bytes.
struct PlanProfile {
  proto::ProfileFile profile;
  bool no_fit_only = false;  // Profiled without the cap: only to say what fits.
};

absl::StatusOr<PlanProfile> ObtainProfile(const PlanFlags& f, uint64_t memory,
                                          const std::function<void(const std::string&)>& progress,
                                          bool tty, uint64_t max_vlayer_weight_bytes = 0,
                                          int more_vlayers_than = 0) {
  PlanProfile out;
  if (!f.profile_path.empty()) {
    HARMONY_ASSIGN_OR_RETURN(out.profile, ReadProfileFile(f.profile_path));
    if (!f.precision.empty()) {
      HARMONY_ASSIGN_OR_RETURN(const bool bf16, ParsePrecisionBf16(f.precision));
      const bool profile_bf16 = out.profile.profile().precision() == proto::BF16;
      HARMONY_ASSIGN_OR_RETURN(const bool fp32_gradients,
                               ParseGradPrecisionFp32(f.grad_precision, bf16));
      if (bf16 == profile_bf16 && !f.grad_precision.empty() &&
          fp32_gradients != out.profile.profile().fp32_gradients()) {
        return absl::FailedPreconditionError(absl::StrCat(
            f.profile_path, " was profiled with ",
            out.profile.profile().fp32_gradients() ? "fp32" : "bf16",
            " gradients, not --grad-precision ", f.grad_precision,
            ": profile again with harmony-plan profile --grad-precision ", f.grad_precision));
      }
      if (bf16 != profile_bf16) {
        return absl::FailedPreconditionError(absl::StrCat(
            f.profile_path, " was profiled in ", profile_bf16 ? "bf16" : "fp32",
            ", not --precision ", f.precision, ": profile again with harmony-plan profile "
            "--precision ", f.precision, ", or leave --precision out"));
      }
    }
    if (!f.model.empty() && out.profile.profile().synthesized()) {
      // The real model a synthesized profile describes: the plan trains it.
      progress(absl::StrCat("checking that ", f.model, " is the model ", f.profile_path,
                            " describes"));
      HARMONY_ASSIGN_OR_RETURN(out.profile, AdoptModel(out.profile, f.model));
      return out;
    }
    if (!f.model.empty() && !out.profile.model().sha256().empty()) {
      HARMONY_ASSIGN_OR_RETURN(std::string sha, common::Sha256OfFile(f.model));
      if (sha != out.profile.model().sha256()) {
        return absl::FailedPreconditionError(absl::StrCat(
            f.profile_path, " profiles another model (sha256 ", out.profile.model().sha256(),
            ", ", f.model, " has ", sha, ")"));
      }
    }
    return out;
  }
  HARMONY_ASSIGN_OR_RETURN(common::TrainingData sample,
                           common::LoadSample(f.sample_path, f.token_dtype, f.seq_len));
  ProfilerOptions options;
  options.devices.count = f.gpus;
  options.devices.capacity = memory;
  options.granularity = f.granularity;
  options.max_vlayer_weight_bytes = max_vlayer_weight_bytes;
  options.split_blocks = f.split_blocks;
  options.more_vlayers_than = more_vlayers_than;
  options.threads_per_device = f.threads_per_device;
  HARMONY_ASSIGN_OR_RETURN(options.flush_denormal, common::ParseFlushDenormal(f.flush_denormal));
  HARMONY_ASSIGN_OR_RETURN(options.bf16,
                           ParsePrecisionBf16(f.precision.empty() ? "fp32" : f.precision));
  HARMONY_ASSIGN_OR_RETURN(options.fp32_gradients,
                           ParseGradPrecisionFp32(f.grad_precision, options.bf16));
  options.optimizer = f.optimizer;
  HARMONY_ASSIGN_OR_RETURN(options.loss, common::ParseLossKind(f.loss));
  options.loss_output = f.loss_output;
  options.max_microbatch = f.minibatch;
  options.progress = progress;
  absl::StatusOr<proto::ProfileFile> measured = ProfileModel(f.model, sample, options);
  if (tty) std::cerr << "\r\033[K";
  if (absl::IsResourceExhausted(measured.status())) {
    // Even the smallest microbatch does not fit: measure it (1, or 2 for a
    // model that cannot train on one sample) on devices as large as the
    // host, to say which vLayer and what memory would do.
    std::cerr << "harmony-plan: " << measured.status().message()
              << "\nharmony-plan: measuring the smallest microbatch without the cap to say "
                 "what fits\n";
    options.devices.capacity = HostMemoryBytes();
    options.smallest_only = true;
    options.repeats = 1;
    measured = ProfileModel(f.model, sample, options);
    if (tty) std::cerr << "\r\033[K";
    if (!measured.ok()) return measured.status();
    measured->mutable_profile()->set_device_memory_bytes(memory);
    out.no_fit_only = true;
  }
  if (!measured.ok()) return measured.status();
  out.profile = *std::move(measured);
  std::cerr << GemmWarning(out.profile.profile().gemm_flop_per_s(),
                           static_cast<int>(out.profile.profile().host_threads()))
            << BlasCoreHint();
  return out;
}

// The search's options from the flags.
absl::StatusOr<MakePlanOptions> PlanOptions(const PlanFlags& f, uint64_t memory,
                                            bool shard_optimizer_state) {
  MakePlanOptions options;
  options.num_devices = f.gpus;
  options.device_memory = memory;
  options.memory_reserve = f.reserve;
  options.minibatch = f.minibatch;
  options.microbatch = f.microbatch;
  options.time_tolerance = f.tolerance;
  HARMONY_ASSIGN_OR_RETURN(options.host_link, ParseHostLink(f.host_link_text));
  HARMONY_ASSIGN_OR_RETURN(options.host_link_latency, ParseHostLinkLatency(f.host_latency_text));
  if (f.servers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--servers ", f.servers, ": at least 1"));
  }
  options.network.servers = f.servers;
  if (f.servers > 1) {
    absl::StatusOr<double> network = common::ParseBandwidth(f.network_text);
    if (!network.ok()) return common::Annotate(network.status(), "--network");
    options.network.bytes_per_s = *network;
    absl::StatusOr<absl::Duration> latency = common::ParseDuration(f.latency_text);
    if (!latency.ok()) return common::Annotate(latency.status(), "--network-latency");
    options.network.latency_s = absl::ToDoubleSeconds(*latency);
    options.network.shard_optimizer_state = shard_optimizer_state;
  }
  if (f.mode == "vpp") {
    options.mode = Mode::kVpp;
  } else if (f.mode == "vdp") {
    options.mode = Mode::kVdp;
  } else if (f.mode != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--mode \"", f.mode, "\": expected auto, vpp or vdp"));
  }
  HARMONY_ASSIGN_OR_RETURN(options.local_activations,
                           ParseAutoYesNo("--local-activations", f.local_text));
  HARMONY_ASSIGN_OR_RETURN(options.peer_weights, ParseAutoYesNo("--peer-weights", f.peer_text));
  if (f.keep_text == "all") {
    options.keep = harmony::planner::KeepActivations::kAll;
  } else if (f.keep_text == "none") {
    options.keep = harmony::planner::KeepActivations::kNone;
  } else if (f.keep_text != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--keep-activations \"", f.keep_text, "\": expected auto, all or none"));
  }
  if (!f.packs_text.empty()) {
    HARMONY_ASSIGN_OR_RETURN(options.backward_packs, ParsePacks(f.packs_text));
  }
  if (f.waves < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--waves ", f.waves, ": expected 0 (search) or a number of passes >= 1"));
  }
  if (f.waves > 1 && f.mode == "vpp") {
    return absl::InvalidArgumentError(
        absl::StrCat("--waves ", f.waves, " runs the minibatch in passes of vDP; not with "
                     "--mode vpp"));
  }
  options.waves = f.waves;
  if (f.schedule == "ondemand") {
    options.schedule = Schedule::kOndemand;
  } else if (f.schedule == "gpipe") {
    options.schedule = Schedule::kGpipe;
  } else if (f.schedule == "dp-swap") {
    options.schedule = Schedule::kDpSwap;
  } else if (f.schedule != "harmony") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--schedule \"", f.schedule, "\": expected harmony, ondemand, gpipe or dp-swap"));
  }
  return options;
}

// Writes the plan, and its JSON and simulated trace when asked for.
absl::Status WritePlanOutputs(const PlanFlags& f, const MadePlan& made) {
  HARMONY_RETURN_IF_ERROR(common::WritePlanFile(f.out, made.plan));
  if (!f.json_out.empty()) HARMONY_RETURN_IF_ERROR(common::WritePlanJson(f.json_out, made.plan));
  if (!f.trace.empty()) {
    HARMONY_ASSIGN_OR_RETURN(SimResult sim,
                             Simulate(*made.cost, made.result.graph, /*keep_events=*/true));
    HARMONY_RETURN_IF_ERROR(common::WriteFileAtomically(f.trace, ChromeTrace(sim)));
  }
  return absl::OkStatus();
}

// The search's figures, the plan, and how busy each device is.
void PrintPlan(const PlanFlags& f, const MadePlan& made) {
  const SearchResult& result = made.result;
  std::cout << "searched " << result.candidates << " configurations (" << result.feasible
            << " fit) in " << absl::StrFormat("%.1f s", made.search_seconds) << "\n"
            << PlanSummary(made.plan);
  const double t = result.sim.iteration_s;
  for (size_t d = 0; d < result.sim.busy.size(); ++d) {
    const auto& busy = result.sim.busy[d];
    std::cout << absl::StrFormat(
        "  device %d busy: compute %.1f%%, weights-in %.1f%%, swap-in %.1f%%, swap-out %.1f%%, "
        "peer %.1f%%\n",
        d, 100 * busy[kCompute] / t, 100 * busy[kWeightsIn] / t, 100 * busy[kSwapIn] / t,
        100 * busy[kSwapOut] / t, 100 * busy[kPeer] / t);
  }
  std::cout << absl::StrFormat("  host CPU optimizer busy: %.1f%%\n",
                               100 * result.sim.optimizer_busy_s / t)
            << "wrote " << f.out;
  if (!f.json_out.empty()) std::cout << ", " << f.json_out;
  if (!f.trace.empty()) std::cout << ", " << f.trace;
  std::cout << "\n";
}

// The weight bytes above which a vLayer is cut inside when profiling again
// with finer cuts: half the heaviest vLayer's, at most a quarter of a device.
uint64_t FinerCutLimit(const proto::ProfileFile& profile, uint64_t memory) {
  uint64_t heaviest = 0;
  for (const proto::VLayerProfile& v : profile.profile().vlayers()) {
    heaviest = std::max<uint64_t>(heaviest, v.parameter_bytes());
  }
  return std::min<uint64_t>(heaviest / 2, memory / 4);
}

// The profile and plan on vLayers cut finer than `coarse`'s (those heavier
// than FinerCutLimit cut along their modules): nullopt when that changes
// nothing (nothing measured then), or when no plan on them fits.
struct FinerPlan {
  PlanProfile profile;
  MadePlan made;
};
absl::StatusOr<std::optional<FinerPlan>> PlanCutFiner(
    const PlanFlags& f, uint64_t memory, const MakePlanOptions& options, const PlanProfile& coarse,
    const std::function<void(const std::string&)>& progress, bool tty) {
  const uint64_t limit = FinerCutLimit(coarse.profile, memory);
  if (limit == 0) return std::nullopt;
  const int before = coarse.profile.model().decomposition().vlayer_count();
  absl::StatusOr<PlanProfile> finer = ObtainProfile(f, memory, progress, tty, limit, before);
  if (absl::IsCancelled(finer.status())) return std::nullopt;  // Cannot cut finer.
  if (!finer.ok()) return finer.status();
  if (finer->no_fit_only) return std::nullopt;
  absl::StatusOr<MadePlan> made = MakePlan(finer->profile, options);
  if (tty) std::cerr << "\r\033[K";
  if (!made.ok() || !made->result.sim.fits) return std::nullopt;
  return FinerPlan{*std::move(finer), *std::move(made)};
}

}  // namespace

int PlanCommand(const Args& args) {
  PlanFlags f;
  std::unique_ptr<po::options_description> flags = PlanFlagsDescription(&f);
  po::variables_map vm;
  if (int rc = Parse(args, *flags, &f.model, &vm); rc != 0) return rc < 0 ? 0 : rc;
  if (int rc = CheckPlanFlags(&f); rc != 0) return rc;
  absl::StatusOr<uint64_t> memory = common::ParseBytes(f.memory_text);
  if (!memory.ok()) return Fail(memory.status());
  const bool tty = ::isatty(STDERR_FILENO);
  auto progress = [&](const std::string& line) {
    if (tty) {
      std::cerr << "\r\033[K" << line << std::flush;
    } else {
      std::cerr << line << "\n";
    }
  };
  // Every flag is checked before a profile that may take minutes.
  absl::StatusOr<MakePlanOptions> options =
      PlanOptions(f, *memory, vm.count("shard-optimizer-state") > 0);
  if (!options.ok()) return Fail(options.status());
  options->progress = progress;
  absl::StatusOr<PlanProfile> profile = ObtainProfile(f, *memory, progress, tty);
  if (!profile.ok()) return Fail(profile.status());
  absl::StatusOr<MadePlan> made = profile->no_fit_only
                                      ? absl::StatusOr<MadePlan>(
                                            absl::ResourceExhaustedError("does not fit"))
                                      : MakePlan(profile->profile, *options);
  if (tty) std::cerr << "\r\033[K";
  // The cuts are the planner's to choose (no --profile, --granularity,
  // --split-blocks or --packs, whose indices are the blocks'): finer ones
  // are tried below.
  const bool cuts_free = options->schedule == Schedule::kHarmony && f.profile_path.empty() &&
                         f.granularity == 0 && !f.split_blocks &&
                         options->backward_packs.empty();
  // Nothing fits with a vLayer per block: cut the heaviest vLayers inside,
  // along their own modules, and profile and search again, before giving up.
  for (int round = 0; absl::IsResourceExhausted(made.status()) && round < 4 && cuts_free;
       ++round) {
    const uint64_t limit = FinerCutLimit(profile->profile, *memory);
    if (limit == 0) break;
    const int before = profile->profile.model().decomposition().vlayer_count();
    std::cerr << "harmony-plan: no schedule fits " << f.gpus << " device(s) of "
              << common::FormatBytes(*memory) << " with " << before
              << " vLayers; cutting those of more than " << common::FormatBytes(limit)
              << " of weights inside, along their modules\n";
    absl::StatusOr<PlanProfile> finer = ObtainProfile(f, *memory, progress, tty, limit, before);
    if (absl::IsCancelled(finer.status())) break;  // Cannot cut finer.
    if (!finer.ok()) return Fail(finer.status());
    std::cerr << "harmony-plan: " << finer->profile.model().decomposition().vlayer_count()
              << " vLayers\n";
    profile = std::move(finer);
    made = profile->no_fit_only
               ? absl::StatusOr<MadePlan>(absl::ResourceExhaustedError("does not fit"))
               : MakePlan(profile->profile, *options);
    if (tty) std::cerr << "\r\033[K";
  }
  // A plan that fits only by summing some packs' gradients on the host
  // (more bytes over the link) may be slower than one on vLayers cut finer:
  // both are planned, the faster kept.
  const auto host_summed = [](const MadePlan& m) {
    const std::vector<bool>& sums = m.result.graph.config.host_sums;
    return std::find(sums.begin(), sums.end(), true) != sums.end();
  };
  if (made.ok() && cuts_free && host_summed(*made)) {
    absl::StatusOr<std::optional<FinerPlan>> finer =
        PlanCutFiner(f, *memory, *options, *profile, progress, tty);
    if (!finer.ok()) {
      std::cerr << "harmony-plan: cutting the vLayers finer failed (" << finer.status().message()
                << "); keeping the plan that sums on the host\n";
    } else if (finer->has_value()) {
      const double coarse_s = made->result.sim.iteration_s;
      const double finer_s = (*finer)->made.result.sim.iteration_s;
      const bool better = finer_s < coarse_s;
      std::cerr << absl::StrFormat(
          "harmony-plan: summing gradients on the host: %s per iteration with %d vLayers; "
          "%d vLayers cut finer: %s; keeping the %s\n",
          common::FormatTimeSpan(absl::Seconds(coarse_s)),
          profile->profile.model().decomposition().vlayer_count(),
          (*finer)->profile.profile.model().decomposition().vlayer_count(),
          common::FormatTimeSpan(absl::Seconds(finer_s)), better ? "finer cuts" : "host sums");
      if (better) {
        profile = std::move((*finer)->profile);
        made = std::move((*finer)->made);
      }
    }
  }
  if (absl::IsResourceExhausted(made.status()) && options->schedule == Schedule::kHarmony) {
    return Fail(absl::ResourceExhaustedError(NoFitMessage(profile->profile, *options, tty)));
  }
  if (!made.ok()) return Fail(made.status());
  if (!made->result.sim.fits) {
    std::cerr << "harmony-plan: warning: the " << f.schedule
              << " schedule does not fit the device memory at microbatch "
              << std::max(1, f.microbatch) << " (see the peaks below)\n";
  }
  if (absl::Status written = WritePlanOutputs(f, *made); !written.ok()) return Fail(written);
  PrintPlan(f, *made);
  return 0;
}

}  // namespace harmony::planner::cli
