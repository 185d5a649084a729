// harmony-plan MODEL.pt ...: profile (or read a profile), search the
// schedule under the devices' memory, simulate it and write the plan.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/loss.h"
#include "common/plan_file.h"
#include "common/tensor_file.h"
#include "common/units.h"
#include "planner/cli.h"
#include "planner/plan/make_plan.h"
#include "planner/plan/no_fit.h"
#include "planner/plan/plan_builder.h"
#include "planner/profile/machine.h"
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

}  // namespace

int PlanCommand(const std::vector<std::string>& args) {
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

}  // namespace harmony::planner::cli
