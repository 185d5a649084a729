// Sections 1-3 of the report: swap bytes, throughput (with the bound and
// where the distance to it comes from) and the simulator's accuracy, over
// the schedules' configurations.

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/units.h"
#include "tests/bench/bench_util.h"
#include "tests/bench/report_format.h"
#include "tests/bench/svg_chart.h"

namespace harmony::bench::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string RateCell(const json& stats) {
  return absl::StrFormat("%.1f (%.1f–%.1f)", stats["median"].get<double>(),
                         stats["min"].get<double>(), stats["max"].get<double>());
}

// The cell of a schedule that has no run in configuration `c`: "does not
// fit" where its planner found no plan for the devices, else "n/a".
std::string Missing(const json& c, const std::string& schedule) {
  if (!c.contains("unplanned") || !c["unplanned"].contains(schedule)) return "n/a";
  const std::string why = c["unplanned"][schedule].get<std::string>();
  return why.rfind("not run", 0) == 0 ? "not run" : "does not fit";
}

// "k of n packs keep" for a run's per-pack choices (results.json
// "activations"), or "" for runs from before they were recorded.
std::string KeepCell(const json& run) {
  if (!run.contains("activations")) return "";
  int kept = 0, total = 0;
  for (const json& a : run["activations"]) {
    ++total;
    if (a.get<std::string>() == "keep") ++kept;
  }
  const int waves = run.value("waves", 1);
  return absl::StrFormat("%d of %d keep%s", kept, total,
                         waves > 1 ? absl::StrFormat(", %d waves", waves) : "");
}

// ", N% reserved" when the run's plan had to leave more than the default
// 10% of the device free; "" otherwise.
std::string ReserveNote(const json& run) {
  const double reserve = run.value("memory_reserve", 0.1);
  return reserve > 0.15 ? absl::StrFormat(", %.0f%% reserved", 100 * reserve) : "";
}

}  // namespace

absl::Status AppendScheduleSections(const json& results, const std::string& dir,
                                    std::string* md) {
  if (!Configs(results).empty()) {
    absl::StrAppendFormat(
        md,
        "## 1. Swap bytes per iteration\n\n"
        "Bytes over the host link in one iteration (host to device and back), counted by the "
        "runtime while it trains; what went device to device instead (a pipeline's activations, "
        "vDP's gradients reduced onto device 0, Harmony's weights copied from device 0) is shown "
        "after it. Each baseline runs at the largest "
        "power-of-two microbatch that fits its devices (as its users would pick); Harmony at "
        "what its search chose. Device memory: %s. Plans leave 10%% of the device free; where "
        "the runtime still ran out of memory (the simulator's peak estimate fell short) the "
        "plan was made again with 10%% more reserved, shown as \"N%% reserved\". The "
        "lower bound is each weight in once per pass that needs it (forward and backward), "
        "each gradient out once, and the input data in. The original Harmony paper reports "
        "two orders of magnitude less swapping than virtualized memory; see the ratios and the "
        "discussion below.\n\n",
        results.value("quick", false)
            ? "twice the model's weight bytes, rounded up (training without swapping needs "
              "weights, gradients, momentum and activations on the device), raised by 1.5x "
              "until every schedule plans"
            : "a quarter of the model's weight bytes (the paper's ratio), raised by a quarter "
              "until Harmony plans; a baseline whose planner finds no plan for those devices "
              "even at microbatch 1 shows \"does not fit\" and is not run. At the large "
              "minibatch each model runs again on devices of three quarters of that (3/16 of "
              "the weights), where Harmony still plans its own schedule: the paper's regime of "
              "a model many times the devices, where on-demand swapping fits fewer samples per "
              "microbatch and swaps every weight in again for each");
    const json& configs = Configs(results);
    for (size_t i = 0; i < configs.size(); ++i) {
      const json& c = configs[i];
      const std::string model = c["model"];
      if (i == 0 || configs[i - 1]["model"] != model) {
        const json& z = c["zoo"];
        absl::StrAppendFormat(
            md,
            "### %s (zoo %s: depth %d, width %d%s; %d vLayers, %s of weights; devices of %s)\n\n"
            "| devices | minibatch | harmony | ondemand | gpipe | dp-swap | lower bound | "
            "ondemand ÷ harmony | harmony ÷ bound |\n|---|---|---|---|---|---|---|---|---|\n",
            model, z["family"].get<std::string>(), z["depth"].get<int>(), z["width"].get<int>(),
            model == "gpt" ? absl::StrFormat(", sequence %d", z["seq_len"].get<int>())
                           : absl::StrFormat(", images %dx%d", z["image_size"].get<int>(),
                                             z["image_size"].get<int>()),
            c["vlayers"].get<int>(), Bytes(c["weight_bytes"].get<double>()),
            Bytes(c["device_memory"].get<double>()));
      }
      std::vector<std::string> cells;
      for (const std::string& sched : kSchedules) {
        const json* r = ByteRun(c, sched);
        // What went device to device instead (vDP: gradients reduced onto
        // device 0, weights copied from it).
        const double peer = r ? (*r)["swap_bytes"].value("peer", 0.0) : 0.0;
        cells.push_back(r ? absl::StrFormat("%s (u=%d%s)%s", Bytes(HostBytes(*r)),
                                            (*r)["backward_microbatch"].get<int>(),
                                            ReserveNote(*r),
                                            peer > 0 ? absl::StrCat(", +", Bytes(peer),
                                                                    " device to device")
                                                     : "")
                          : Missing(c, sched));
      }
      const json* h = ByteRun(c, "harmony");
      const json* od = ByteRun(c, "ondemand");
      const double lb = c["lower_bound_bytes"].get<double>();
      // Rows on smaller devices than the heading's say so.
      absl::StrAppendFormat(md, "| %d%s | %d | %s | %s | %.1fx | %.1fx |\n",
                            c["devices"].get<int>(),
                            c.value("smaller_devices", false)
                                ? absl::StrCat(" of ", Bytes(c["device_memory"].get<double>()))
                                : "",
                            c["minibatch"].get<int>(),
                            absl::StrJoin(cells, " | "), Bytes(lb),
                            h && od ? HostBytes(*od) / HostBytes(*h) : kNaN,
                            h ? HostBytes(*h) / lb : kNaN);
      if (i + 1 == configs.size() || configs[i + 1]["model"] != model) *md += "\n";
    }
    // Charts per model.
    std::vector<std::string> models;
    for (const json& c : Configs(results)) {
      if (std::find(models.begin(), models.end(), c["model"]) == models.end()) {
        models.push_back(c["model"]);
      }
    }
    for (const std::string& model : models) {
      BarChart chart;
      chart.title = absl::StrCat("Swap bytes per iteration, ", model, " (log scale)");
      chart.y_label = "bytes over the host link";
      chart.log_scale = true;
      for (const std::string& sched : kSchedules) chart.series.push_back({sched, {}});
      chart.series.push_back({"lower bound", {}});
      for (const json& c : Configs(results)) {
        if (c["model"] != model) continue;
        const std::string name = ConfigName(c);  // "gpt N=2 D=256 ...": less the model.
        chart.categories.push_back(name.substr(name.find(' ') + 1));
        for (size_t i = 0; i < kSchedules.size(); ++i) {
          const json* r = ByteRun(c, kSchedules[i]);
          chart.series[i].values.push_back(r ? HostBytes(*r) : kNaN);
        }
        chart.series.back().values.push_back(c["lower_bound_bytes"].get<double>());
      }
      const std::string file = absl::StrCat("swap_bytes_", model, ".svg");
      absl::Status w = common::WriteFileAtomically(absl::StrCat(dir, "/", file), DrawBarChart(chart));
      if (!w.ok()) return w;
      absl::StrAppend(md, "![swap bytes, ", model, "](", file, ")\n\n");
    }

    absl::StrAppendFormat(
        md,
        "## 2. Throughput\n\n"
        "Samples per second, median (min–max) of %d timed iterations, every schedule in the same "
        "run. Rows marked **emulated** ran with `--emulate-host-link %s`: host-device copies share "
        "one link of that bandwidth, which puts this machine's measured matrix-multiply rate "
        "(%.1f GFLOP/s) at %.0f FLOP per byte of link, as a GTX 1080 Ti on PCIe 3.0. Those rows "
        "are emulated, not measured on a GPU server. Ratios are Harmony's samples/s over the "
        "baseline's.\n\n"
        "| config | link | harmony | ondemand | gpipe | dp-swap | ÷ ondemand | ÷ gpipe | ÷ dp-swap |\n"
        "|---|---|---|---|---|---|---|---|---|\n",
        results.value("runs", 0), Emulated(results),
        results["link_balance"]["gemm_flop_per_s"].get<double>() / 1e9,
        results["link_balance"]["flop_per_byte"].get<double>());
    for (bool emulated : {false, true}) {
      for (const json& c : Configs(results)) {
        std::vector<std::string> cells, ratios;
        const json* h = FindRun(c, "harmony", emulated);
        if (h == nullptr) continue;  // The full form runs emulated only.
        for (const std::string& sched : kSchedules) {
          const json* r = FindRun(c, sched, emulated);
          cells.push_back(r ? absl::StrCat(RateCell((*r)["samples_per_s"]), ReserveNote(*r))
                            : Missing(c, sched));
          if (sched != "harmony") {
            ratios.push_back(h && r ? absl::StrFormat("%.2fx", Rate(*h) / Rate(*r)) : "n/a");
          }
        }
        absl::StrAppendFormat(md, "| %s | %s | %s | %s |\n", ConfigName(c),
                              emulated ? "**emulated**" : "none", absl::StrJoin(cells, " | "),
                              absl::StrJoin(ratios, " | "));
      }
    }
    *md += "\n";
    absl::StrAppend(
        md,
        "Harmony against its limit, emulated link: the bound is the longer of the plain compute "
        "of the minibatch spread over the devices (profiled forward and backward at the largest "
        "microbatch that fits) and the least host-link traffic (each weight in twice, each "
        "gradient out once, the data in) over the link. On-demand is shown at its planner's "
        "microbatch and at Harmony's.\n\n"
        "| config | harmony | bound | ÷ bound | best baseline | harmony ÷ best | ondemand (own "
        "microbatch) | ondemand at harmony's | harmony ÷ ondemand (own / harmony's) |\n"
        "|---|---|---|---|---|---|---|---|---|\n");
    for (const json& c : Configs(results)) {
      const json* h = FindRun(c, "harmony", true);
      if (h == nullptr || !c.contains("bound_s")) continue;
      const double th = (*h)["iteration_s"]["median"].get<double>();
      const double bound = c["bound_s"].get<double>();
      std::string best_name = "n/a";
      double best = 0;
      for (const std::string& b : kBaselines) {
        const json* r = FindRun(c, b, true);
        if (r == nullptr) continue;
        const double t = (*r)["iteration_s"]["median"].get<double>();
        if (best == 0 || t < best) {
          best = t;
          best_name = absl::StrFormat("%s, microbatch %d: %s", b,
                                      (*r)["backward_microbatch"].get<int>(), Seconds(t));
        }
      }
      const json* od = FindRun(c, "ondemand", true);
      const double tod = od ? (*od)["iteration_s"]["median"].get<double>() : 0;
      // The microbatch the "at Harmony's" run really ran at (runs before
      // the first at-scale ones planned it at on-demand's own best, whatever was asked).
      const json* at_h = c.contains("ondemand_at_harmony_microbatch")
                             ? &c["ondemand_at_harmony_microbatch"]
                             : od;
      const double tod_h = at_h ? (*at_h)["iteration_s"]["median"].get<double>() : 0;
      absl::StrAppendFormat(
          md,
          "| %s | %s (microbatch %d) | %s | %.2f | %s | %.2fx | %s (%d) | %s (%d) | %.2fx / "
          "%.2fx |\n",
          ConfigName(c), Seconds(th), (*h)["backward_microbatch"].get<int>(), Seconds(bound),
          th / bound, best_name, best > 0 ? best / th : kNaN, Seconds(tod),
          od ? (*od)["backward_microbatch"].get<int>() : 0, Seconds(tod_h),
          at_h ? (*at_h)["backward_microbatch"].get<int>() : 0, tod / th, tod_h / th);
    }
    *md += "\n";
    // Where Harmony's distance to the bound comes from: its own compute (at
    // its microbatch sizes, with the backward's recompute of the forward,
    // which the bound's plain compute does not do) and its own bytes over
    // the link; what is left is overlap.
    std::string floors;
    for (const json& c : Configs(results)) {
      const json* h = FindRun(c, "harmony", true);
      if (h == nullptr || !c.contains("bound_s") || !h->contains("planned_compute_s")) continue;
      const double th = (*h)["iteration_s"]["median"].get<double>();
      const double compute = (*h)["planned_compute_s"].get<double>();
      const double link = c["emulated_link_bytes_per_s"].get<double>();
      // The emulated link is full duplex: the busier direction bounds it.
      const json& b = (*h)["swap_bytes"];
      const double in = b.value("weights_in", 0.0) + b.value("activations_in", 0.0) +
                        b.value("stash_in", 0.0) + b.value("kept_in", 0.0) +
                        b.value("data_in", 0.0);
      const double bytes_s = link > 0 ? std::max(in, HostBytes(*h) - in) / link : 0;
      const double floor = std::max(compute, bytes_s);
      const double bound = c["bound_s"].get<double>();
      // The runtime's compute is summed over the devices.
      const double measured = h->contains("compute_s")
                                  ? (*h)["compute_s"].get<double>() / c["devices"].get<int>()
                                  : kNaN;
      absl::StrAppendFormat(
          &floors, "| %s | %s | %s (%.2fx) | %s (%.2fx) | %s | %s (%.2fx) | %.2f |\n",
          ConfigName(c), Seconds(th), Seconds(c["compute_bound_s"].get<double>()),
          c["compute_bound_s"].get<double>() / bound, Seconds(compute), compute / bound,
          Seconds(measured), Seconds(bytes_s), bytes_s / bound, th / floor);
    }
    if (!floors.empty()) {
      absl::StrAppend(
          md,
          "Where the distance to the bound comes from: Harmony's own compute on its busiest "
          "device (at its microbatch sizes, the backward recomputing the forward from the "
          "stash, which the bound's plain compute does not) and its own bytes over the link "
          "in the busier direction (the emulated link, as PCIe, carries both directions at "
          "once; the bound above counts both on one); measured ÷ the larger of the two is what "
          "overlap leaves. Ratios in brackets are to the bound.\n\n"
          "| config | harmony | bound's compute | harmony's compute, planned | measured, per "
          "device | harmony's bytes over the link, busier direction | measured ÷ its own floor |\n"
          "|---|---|---|---|---|---|---|\n",
          floors, "\n");
    }
    // The plan's own bound (its compute at its microbatch, with any
    // recompute, or its own bytes over the link, per plan), its choice of
    // keeping or recomputing activations, and the paper's regime (large
    // minibatches of many microbatches).
    std::string own;
    // A row per Harmony run: the search's plan, and (results.json
    // "harmony_one_pass") the large minibatch in one pass where it chose
    // waves.
    auto own_row = [&](const json& c, const json* h, const std::string& name) {
      if (h == nullptr || !c.contains("bound_s") || !h->contains("plan_bound_s")) return;
      const double th = (*h)["iteration_s"]["median"].get<double>();
      const double bound = c["bound_s"].get<double>();
      const double plan_bound = (*h)["plan_bound_s"].get<double>();
      const double sim = (*h)["simulator_error"].get<double>();
      std::string regime = "";
      if (const json* od = FindRun(c, "ondemand", true); od != nullptr) {
        const json& hb = (*h)["swap_bytes"];
        const json& ob = (*od)["swap_bytes"];
        const double hwg = hb.value("weights_in", 0.0) + hb.value("gradients_out", 0.0);
        const double owg = ob.value("weights_in", 0.0) + ob.value("gradients_out", 0.0);
        const double rate = (*od)["iteration_s"]["median"].get<double>() / th;
        regime = absl::StrFormat("%.1fx | %.1fx | %.2fx", hwg > 0 ? owg / hwg : kNaN,
                                 HostBytes(*h) > 0 ? HostBytes(*od) / HostBytes(*h) : kNaN,
                                 rate);
      } else {
        regime = "n/a | n/a | n/a";
      }
      absl::StrAppendFormat(&own, "| %s | %s | %s (%.2fx) | %s (%.2fx) | %+.0f%% | %s | %s |\n",
                            name, Seconds(th), Seconds(bound), th / bound,
                            Seconds(plan_bound), th / plan_bound, 100 * sim, KeepCell(*h),
                            regime);
    };
    for (const json& c : Configs(results)) {
      own_row(c, FindRun(c, "harmony", true), ConfigName(c));
      if (c.contains("harmony_one_pass")) {
        own_row(c, &c["harmony_one_pass"], absl::StrCat(ConfigName(c), ", in one pass"));
      }
    }
    if (!own.empty()) {
      absl::StrAppend(
          md,
          "Both bounds, and keep or recompute: the bound above (plain compute vs the least link "
          "bytes) and the plan's own (its compute on its busiest device at its microbatch, any "
          "recompute included, vs its own planned bytes in the busier link direction), with "
          "Harmony's measured time over each; the simulator's error beside it; how many "
          "backward packs keep their activations instead of recomputing them (the last, fused, "
          "never recomputes) and, where the minibatch runs in waves (passes over the packs, each on a "
          "slice of it, so that a device keeps one pass's activations), how many; and against "
          "on-demand: weight and gradient bytes, all bytes, "
          "and throughput (the paper's regime is the large minibatch of many microbatches, "
          "where on-demand swaps every weight again per microbatch). Where the search ran the "
          "large minibatch in waves (within its time tolerance, for fewer bytes in all), a row "
          "\"in one pass\" runs it again with the activations through the host instead "
          "(harmony-plan --waves 1): each weight then crosses the link once per pass.\n\n"
          "| config | harmony | bound (÷) | plan's own bound (÷) | simulator | activations | "
          "weights+gradients, ondemand ÷ harmony | all bytes, ondemand ÷ harmony | samples/s, "
          "harmony ÷ ondemand |\n|---|---|---|---|---|---|---|---|---|\n",
          own, "\n");
    }
    for (bool emulated : {false, true}) {
      BarChart chart;
      chart.title = emulated ? absl::StrCat("Harmony's speedup, emulated ", Emulated(results),
                                            " host link (log scale)")
                             : "Harmony's speedup, no link emulation (log scale)";
      chart.y_label = "Harmony samples/s ÷ baseline's";
      chart.log_scale = true;
      chart.reference = 1;
      chart.reference_label = "1x";
      for (const std::string& b : kBaselines) chart.series.push_back({absl::StrCat("vs ", b), {}});
      for (const json& c : Configs(results)) {
        chart.categories.push_back(ConfigName(c));
        const json* h = FindRun(c, "harmony", emulated);
        for (size_t i = 0; i < kBaselines.size(); ++i) {
          const json* r = FindRun(c, kBaselines[i], emulated);
          chart.series[i].values.push_back(h && r ? Rate(*h) / Rate(*r) : kNaN);
        }
      }
      const std::string file = emulated ? "speedup_emulated.svg" : "speedup.svg";
      absl::Status w = common::WriteFileAtomically(absl::StrCat(dir, "/", file), DrawBarChart(chart));
      if (!w.ok()) return w;
      absl::StrAppend(md, "![", chart.title, "](", file, ")\n\n");
    }

    std::string latencies;
    for (const json& c : Configs(results)) {
      if (!c.contains("emulated_link_latency_s")) continue;
      absl::StrAppend(&latencies, latencies.empty() ? "" : ", ", ConfigName(c), " ",
                      Seconds(c["emulated_link_latency_s"].get<double>()));
    }
    absl::StrAppend(
        md,
        "## 3. Simulator accuracy\n\n"
        "The planner's simulated iteration time (fed the profiled bandwidths, or the emulated "
        "link for emulated rows) against the measured median. Error = (simulated − measured) ÷ "
        "measured. The last column is the runtime's compute per device (summed over its "
        "vLayer invocations) over the profile's for the same work (the plan's tasks as the "
        "simulator priced them, each alone or beside busy devices): where it is far from 1.00 "
        "the machine computed at another speed than when the model was profiled, and the "
        "error shows that rather than the schedule (a shared VM's speed can swing by tens of "
        "percent over minutes: docs/bench/scale.md). So the column after it is the plan "
        "simulated again with the profile's compute times scaled by that ratio (harmony-plan "
        "simulate --compute-scale): the simulator's error at the speed the machine ran. "
        "That uses the run's own measurement; the two columns before it do not: right before "
        "each run's timed iterations and right after them the bench profiles the model again "
        "at the plan's microbatch sizes (harmony-plan profile --microbatches, seconds) and "
        "simulates the plan with the two profiles' mean times (harmony-plan simulate "
        "--times-from), as a user on a machine whose speed drifts would before a run; beside "
        "that error, the profile after the run over the one before it: more than ",
        absl::StrFormat("%.0f%%", 100 * kSteadyWithin),
        " apart either way, or the run's compute outside ",
        absl::StrFormat("%.2f-%.2fx", kSteadyComputeLow, kSteadyComputeHigh),
        " their times, or its slowest timed iteration over ",
        absl::StrFormat("%.2fx", kSteadySpread),
        " its fastest, the machine's speed moved during the run, and no profile taken "
        "outside it can say how fast it ran: the bench times the run again (",
        kTimings, " timings at most; \"timing 2 of 2\" says which was kept: the steadiest) "
        "and marks a row still that far apart **unsteady** (the "
        "headline gives the runs the machine held its speed through apart). In "
        "brackets beside the error at the run's compute speed, the plan simulated at the "
        "speed of the run's slowest device (per iteration): devices that run in step, as "
        "vDP's reductions and shared weights make them, wait for the slowest, where the "
        "simulator's devices, all as fast, wait for none; the last column is how long the "
        "devices waited for each other, a share of their time (harmony-exec prints both as "
        "its \"device balance\").",
        latencies.empty()
            ? ""
            : absl::StrCat(" Emulated rows are planned with a fixed cost per host transfer, the "
                           "profile's hand-off to the copy thread plus what an emulated copy's "
                           "sleep oversleeps (harmony-plan --host-link-latency): ",
                           latencies, "."),
        "\n\n| config | link | schedule | simulated | measured | error | compute, measured ÷ "
        "profiled | profiled again around the run: simulated (error) | compute ÷ those times | "
        "error at the run's compute speed (at its slowest device's) | devices waiting for "
        "each other |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (bool emulated : {false, true}) {
      for (const json& c : Configs(results)) {
        for (const std::string& sched : kSchedules) {
          const json* r = FindRun(c, sched, emulated);
          if (!r) continue;
          const double compute = ComputeRatio(c, *r);
          const std::string at_speed =
              r->contains("simulator_error_at_measured_compute")
                  ? absl::StrFormat(
                        "%+.0f%% (%s)",
                        100 * (*r)["simulator_error_at_measured_compute"].get<double>(),
                        Seconds((*r)["simulated_at_measured_compute_s"].get<double>()))
                  : "n/a";
          const std::string slowest =
              r->contains("simulator_error_at_slowest_device")
                  ? absl::StrFormat(
                        " (%+.0f%%)", 100 * (*r)["simulator_error_at_slowest_device"].get<double>())
                  : "";
          const std::string waits =
              r->contains("peer_wait_share")
                  ? absl::StrFormat("%.1f%%", 100 * (*r)["peer_wait_share"].get<double>())
                  : "n/a";
          absl::StrAppendFormat(md, "| %s | %s | %s | %s | %s | %+.0f%% | %s | %s | %s%s | %s |\n",
                                ConfigName(c), emulated ? "**emulated**" : "none", sched,
                                Seconds((*r)["simulated_s"].get<double>()),
                                Seconds((*r)["iteration_s"]["median"].get<double>()),
                                100 * (*r)["simulator_error"].get<double>(),
                                compute > 0 ? absl::StrFormat("%.2f", compute) : "n/a",
                                RetimedCells(*r), at_speed, slowest, waits);
        }
      }
    }
    *md += "\n";
    BarChart chart;
    chart.title = "Simulator error, |simulated − measured| ÷ measured";
    chart.y_label = "% error";
    for (const std::string& sched : kSchedules) chart.series.push_back({sched, {}});
    for (const std::string& sched : kSchedules) chart.series.push_back({sched + " (emulated)", {}});
    for (const json& c : Configs(results)) {
      chart.categories.push_back(ConfigName(c));
      for (size_t i = 0; i < kSchedules.size(); ++i) {
        for (bool emulated : {false, true}) {
          const json* r = FindRun(c, kSchedules[i], emulated);
          chart.series[i + (emulated ? kSchedules.size() : 0)].values.push_back(
              r ? 100 * std::fabs((*r)["simulator_error"].get<double>()) : kNaN);
        }
      }
    }
    absl::Status w = common::WriteFileAtomically(absl::StrCat(dir, "/simulator_error.svg"),
                                                 DrawBarChart(chart));
    if (!w.ok()) return w;
    absl::StrAppend(md, "![simulator error](simulator_error.svg)\n\n");
  }
  return absl::OkStatus();
}

}  // namespace harmony::bench::report
