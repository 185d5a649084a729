// harmony-plan simulate and inspect: a saved plan, re-simulated from the
// profile it carries or printed.

#include <iostream>
#include <string>

#include "absl/strings/str_format.h"
#include "common/files.h"
#include "common/plan_file.h"
#include "common/status.h"
#include "common/units.h"
#include "planner/cli.h"
#include "planner/plan/plan_builder.h"
#include "planner/plan/resimulate.h"
#include "planner/profile/profiler.h"
#include "planner/sim/simulator.h"

namespace harmony::planner::cli {

namespace po = boost::program_options;

int SimulateCommand(const std::vector<std::string>& args) {
  std::string path, trace, host_link_text, host_latency_text, times_from;
  double compute_scale = 1;
  po::options_description flags(
      "Usage: harmony-plan simulate plan.pb [--trace t.json] [--host-link BW]\n\n"
      "Re-simulates a saved plan from the profile it carries: validates its task\n"
      "graph and prints the predicted iteration, on the host link the plan was made\n"
      "for (its --host-link and --host-link-latency, else the profile's) or another,\n"
      "at the profiled compute speed or another, or with the vLayer times of\n"
      "another profile of the model (taken again right before a run).\n\nFlags");
  flags.add_options()("help,h", "show this help")(
      "trace", po::value(&trace), "write a Chrome trace of the iteration")(
      "host-link", po::value(&host_link_text),
      "host<->device bandwidth, e.g. 12GB/s (default: the plan's)")(
      "host-link-latency", po::value(&host_latency_text),
      "fixed cost of each host transfer, e.g. 100us (default: the plan's)")(
      "compute-scale", po::value(&compute_scale)->default_value(1),
      "every device compute time of the profile times this, e.g. 1.2 for devices 1.2x "
      "slower than when the model was profiled (harmony-exec prints the ratio it measured: "
      "\"device compute per iteration ... Nx the plan's\")")(
      "times-from", po::value(&times_from),
      "PROFILE.json: the device compute times of this profile of the same model (e.g. "
      "harmony-plan profile --microbatches with the plan's sizes, taken right before a run "
      "on a machine whose speed drifts); sizes it lacks are scaled by their vLayer's ratio");
  po::variables_map vm;
  if (int rc = Parse(args, flags, &path, &vm); rc != 0) return rc < 0 ? 0 : rc;
  if (path.empty()) {
    std::cerr << "harmony-plan simulate: need plan.pb (see --help)\n";
    return 2;
  }
  auto plan = harmony::common::ReadPlanFile(path);
  if (!plan.ok()) return Fail(plan.status());
  harmony::planner::ResimulateOptions options;
  options.compute_scale = compute_scale;
  options.keep_events = !trace.empty();
  harmony::proto::ProfileFile times;
  if (!times_from.empty()) {
    absl::StatusOr<harmony::proto::ProfileFile> read =
        harmony::planner::ReadProfileFile(times_from);
    if (!read.ok()) return Fail(read.status());
    times = *std::move(read);
    options.times_from = &times;
  }
  if (!host_link_text.empty()) {
    absl::StatusOr<double> host_link = ParseHostLink(host_link_text);
    if (!host_link.ok()) return Fail(host_link.status());
    options.host_link = *host_link;
  }
  if (!host_latency_text.empty()) {
    absl::StatusOr<double> host_latency = ParseHostLinkLatency(host_latency_text);
    if (!host_latency.ok()) return Fail(host_latency.status());
    options.host_link_latency = *host_latency;
  }
  auto again = harmony::planner::ResimulatePlan(*plan, options);
  if (!again.ok()) return Fail(harmony::common::Annotate(again.status(), path));
  if (!times_from.empty()) {
    const harmony::planner::ReplacedTimes& r = again->replaced;
    std::cout << absl::StrFormat(
        "vLayer times from %s: %d rows taken, %d scaled; compute %.2fx the plan's profile on "
        "the sizes both have\n",
        times_from, r.rows_taken, r.rows_scaled, r.ratio);
  }
  const harmony::planner::SimResult& sim = again->sim;
  std::cout << absl::StrFormat(
      "%s: iteration %s (%.2f samples/s), %s over the host link, peaks", path,
      harmony::common::FormatTimeSpan(absl::Seconds(sim.iteration_s)),
      again->graph.config.minibatch / sim.iteration_s,
      harmony::common::FormatBytes(sim.swap.host_link()));
  for (uint64_t p : sim.device_peak) std::cout << " " << harmony::common::FormatBytes(p);
  std::cout << (sim.fits ? "" : " (over the device memory)");
  if (compute_scale != 1) {
    std::cout << absl::StrFormat(", compute %.2fx the profile's", compute_scale);
  }
  // harmony-exec's "device compute per iteration ... Nx the plan's" compares
  // with this figure.
  std::cout << absl::StrFormat(
      ", device compute %s (summed over the devices)",
      harmony::common::FormatTimeSpan(absl::Seconds(again->device_compute_s)));
  double handoff = 0;
  for (double h : sim.handoff_s) handoff += h;
  if (handoff > 0) {
    std::cout << absl::StrFormat(
        ", hand-offs between steps %s (summed; the profile's step hand-off)",
        harmony::common::FormatTimeSpan(absl::Seconds(handoff)));
  }
  std::cout << "\n";
  if (!trace.empty()) {
    absl::Status written =
        harmony::common::WriteFileAtomically(trace, harmony::planner::ChromeTrace(sim));
    if (!written.ok()) return Fail(written);
    std::cout << "wrote " << trace << "\n";
  }
  return 0;
}

int InspectCommand(const std::vector<std::string>& args) {
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

}  // namespace harmony::planner::cli
