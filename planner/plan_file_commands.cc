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
#include "planner/search/cost_model.h"
#include "planner/search/task_graph.h"
#include "planner/sim/simulator.h"

namespace harmony::planner::cli {

namespace po = boost::program_options;

int SimulateCommand(const std::vector<std::string>& args) {
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
