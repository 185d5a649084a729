#include "tests/bench/report.h"

#include <algorithm>
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

namespace harmony::bench {
namespace {

using report::ByteRun;
using report::Bytes;
using report::Configs;
using report::Emulated;
using report::FindRun;
using report::HostBytes;
using report::json;
using report::kBaselines;
using report::Rate;
using report::Seconds;
using report::TimeCell;

std::string RangeText(const std::vector<double>& v, const char* format = "%.1fx") {
  if (v.empty()) return "n/a";
  const Stats s = Summarize(v);
  if (s.runs == 1) return absl::StrFormat(format, s.median);
  return absl::StrCat(absl::StrFormat(format, s.median), " (",
                      absl::StrFormat(format, s.min), "–", absl::StrFormat(format, s.max), ")");
}

// Ratios of `baseline`'s bytes to harmony's over every configuration.
std::vector<double> ByteRatios(const json& results, const std::string& baseline) {
  std::vector<double> v;
  for (const json& c : Configs(results)) {
    const json* h = ByteRun(c, "harmony");
    const json* b = ByteRun(c, baseline);
    if (h && b && HostBytes(*h) > 0) v.push_back(HostBytes(*b) / HostBytes(*h));
  }
  return v;
}

std::vector<double> SpeedRatios(const json& results, const std::string& baseline, bool emulated) {
  std::vector<double> v;
  for (const json& c : Configs(results)) {
    const json* h = FindRun(c, "harmony", emulated);
    const json* b = FindRun(c, baseline, emulated);
    if (h && b) v.push_back(Rate(*h) / Rate(*b));
  }
  return v;
}

// 100 |x| of the runs' field `key` in one mode (of one schedule, when
// given), for those that have it: the simulator's error ("simulator_error";
// "simulator_error_at_measured_compute": the plan simulated again at the
// compute speed the run measured, which runs before it was recorded lack)
// or a share of the devices' time ("peer_wait_share").
std::vector<double> RunPercents(const json& results, bool emulated,
                                const std::string& key = "simulator_error",
                                const std::string& schedule = "") {
  std::vector<double> v;
  for (const json& c : Configs(results)) {
    for (const json& r : c["runs"]) {
      if (!schedule.empty() && r["schedule"] != schedule) continue;
      if (r["emulated"].get<bool>() == emulated && r.contains(key)) {
        v.push_back(100 * std::fabs(r[key].get<double>()));
      }
    }
  }
  return v;
}

// A field of the runs' "retimed" records (profiled again around each run:
// before its timed iterations and after them), emulated runs or not, of
// every schedule or one; `percent`: 100 |x|; `steady`: only the runs the
// machine's speed held through (report::Unsteady).
std::vector<double> RetimedValues(const json& results, bool emulated, const std::string& field,
                                  bool percent, const std::string& schedule = "",
                                  bool steady = false) {
  std::vector<double> v;
  for (const json& c : Configs(results)) {
    for (const json& r : c["runs"]) {
      if (r["emulated"].get<bool>() != emulated || !r.contains("retimed") ||
          !r["retimed"].contains(field) || (steady && report::Unsteady(r["retimed"]))) {
        continue;
      }
      if (!schedule.empty() && r["schedule"] != schedule) continue;
      const double x = r["retimed"][field].get<double>();
      v.push_back(percent ? 100 * std::fabs(x) : x);
    }
  }
  return v;
}

std::vector<double> ComputeRatios(const json& results) {
  std::vector<double> v;
  for (const json& c : Configs(results)) {
    for (const json& r : c["runs"]) {
      if (double ratio = report::ComputeRatio(c, r); ratio > 0) v.push_back(ratio);
    }
  }
  return v;
}

}  // namespace

std::string Headline(const json& results) {
  std::string out;
  if (!Configs(results).empty()) {
    std::vector<std::string> parts;
    for (const std::string& b : kBaselines) {
      parts.push_back(absl::StrCat(b, " ", RangeText(ByteRatios(results, b))));
    }
    std::vector<double> lb;
    for (const json& c : Configs(results)) {
      const json* h = ByteRun(c, "harmony");
      if (h) lb.push_back(HostBytes(*h) / c["lower_bound_bytes"].get<double>());
    }
    absl::StrAppend(&out, "- **Swap bytes per iteration** (runtime-counted; baseline ÷ Harmony, "
                          "median (min–max) over ", Configs(results).size(), " configurations): ",
                    absl::StrJoin(parts, ", "), ". Harmony moves ", RangeText(lb),
                    " the lower bound.\n");
    // Weights and gradients alone: what input-batch grouping saves.
    auto w = [](const json& r) {
      return r["swap_bytes"]["weights_in"].get<double>() +
             r["swap_bytes"]["gradients_out"].get<double>();
    };
    std::vector<double> weights;
    for (const json& c : Configs(results)) {
      const json* h = ByteRun(c, "harmony");
      const json* od = ByteRun(c, "ondemand");
      if (!h || !od) continue;
      if (w(*h) > 0) weights.push_back(w(*od) / w(*h));
    }
    // The paper's regime by name: the large minibatch in one pass (results.json
    // "harmony_one_pass") and on smaller devices ("smaller_devices"), Harmony's
    // weights and gradients and its samples/s against on-demand's.
    std::string named;
    auto name = [&](const std::string& label, const json& h, const json& od) {
      if (w(h) <= 0) return;
      absl::StrAppendFormat(&named, "%s%s %.1fx (samples/s %.2fx on-demand's)",
                            named.empty() ? " (" : ", ", label, w(od) / w(h),
                            od["iteration_s"]["median"].get<double>() /
                                h["iteration_s"]["median"].get<double>());
    };
    for (const json& c : Configs(results)) {
      const json* h = ByteRun(c, "harmony");
      const json* od = ByteRun(c, "ondemand");
      if (!od) continue;
      if (h && c.value("smaller_devices", false)) name(report::ConfigName(c), *h, *od);
      if (c.contains("harmony_one_pass")) {
        name(absl::StrCat(report::ConfigName(c), " in one pass"), c["harmony_one_pass"], *od);
      }
    }
    if (!named.empty()) named += ")";
    const std::vector<double> all = ByteRatios(results, "ondemand");
    const double median = all.empty() ? 0 : Summarize(all).median;
    absl::StrAppend(
        &out, "- **Against the paper's two orders of magnitude**: weights and gradients alone, "
              "on-demand swapping moves ", RangeText(weights), " Harmony's", named,
        "; all bytes, ", RangeText(all), median >= 100 ? ": as the paper reports.\n"
                                      : ": short of it. Activation stashes, which every schedule "
                                        "moves alike, dominate these small models' traffic; the "
                                        "saving is in the weights.\n");
    // The simulator's errors, without link emulation and emulated.
    const std::vector<double> sim_errors[2] = {RunPercents(results, false),
                                               RunPercents(results, true)};
    for (bool emulated : {false, true}) {
      if (sim_errors[emulated].empty()) continue;  // No runs in this mode.
      parts.clear();
      for (const std::string& b : kBaselines) {
        parts.push_back(absl::StrCat(b, " ", RangeText(SpeedRatios(results, b, emulated))));
      }
      absl::StrAppend(&out, "- **Throughput** (Harmony ÷ baseline samples/s",
                      emulated ? absl::StrCat(", **emulated** ", Emulated(results), " host link")
                               : ", no link emulation",
                      "): ", absl::StrJoin(parts, ", "), ".\n");
    }
    std::vector<std::string> errors;
    for (bool emulated : {false, true}) {
      if (sim_errors[emulated].empty()) continue;
      errors.push_back(absl::StrCat(RangeText(sim_errors[emulated], "%.0f%%"),
                                    emulated ? " emulated" : " without link emulation"));
    }
    absl::StrAppend(&out, "- **Simulator**: median |error| of the simulated iteration time ",
                    absl::StrJoin(errors, ", "));
    if (std::vector<double> ratios = ComputeRatios(results); !ratios.empty()) {
      // Where the runs computed at another speed than the profile (the
      // median beyond 10%, or a run outside 0.8-1.25x), the errors say
      // that too.
      const Stats r = Summarize(ratios);
      const bool off = std::abs(r.median - 1) > 0.1 || r.min < 0.8 || r.max > 1.25;
      absl::StrAppend(&out, "; the runtime's compute per device was ",
                      RangeText(ratios, "%.2fx"), " the profile's for the same work",
                      off ? " (far from 1.00x: the machine ran at another speed than when it "
                            "was profiled)"
                          : "");
    }
    std::vector<std::string> retimed;
    for (bool emulated : {false, true}) {
      const std::vector<double> e = RetimedValues(results, emulated, "simulator_error", true);
      if (e.empty()) continue;
      const std::vector<double> h =
          RetimedValues(results, emulated, "simulator_error", true, "harmony");
      const std::vector<double> ratio = RetimedValues(results, emulated, "compute_ratio", false);
      retimed.push_back(absl::StrCat(
          RangeText(e, "%.0f%%"), emulated ? " emulated" : " without link emulation",
          h.empty() ? "" : absl::StrCat(" (Harmony's ", RangeText(h, "%.0f%%"), ")"),
          ratio.empty() ? ""
                        : absl::StrCat(", the runtime's compute ", RangeText(ratio, "%.2fx"),
                                       " those times")));
    }
    if (!retimed.empty()) {
      absl::StrAppend(&out, "; with the model profiled again at the plan's sizes around each "
                            "run: median |error| ", absl::StrJoin(retimed, "; "));
    }
    absl::StrAppend(&out, report::TimedAgainText(results));
    std::vector<std::string> steady;
    for (bool emulated : {false, true}) {
      const std::vector<double> all = RetimedValues(results, emulated, "simulator_error", true);
      const std::vector<double> e =
          RetimedValues(results, emulated, "simulator_error", true, "", true);
      if (e.empty() || e.size() == all.size()) continue;
      const std::vector<double> h =
          RetimedValues(results, emulated, "simulator_error", true, "harmony", true);
      steady.push_back(absl::StrCat(
          e.size(), " of ", all.size(), emulated ? " emulated" : " without link emulation",
          ": median |error| ", RangeText(e, "%.0f%%"),
          h.empty() ? "" : absl::StrCat(" (Harmony's ", RangeText(h, "%.0f%%"), ")")));
    }
    if (!steady.empty()) {
      absl::StrAppend(&out, absl::StrFormat(
                                "; of those, in the runs the machine's speed held through (the "
                                "profiles before and after within %.0f%% of each other), ",
                                100 * kSteadyWithin),
                      absl::StrJoin(steady, "; "));
    }
    std::vector<std::string> at_speed;
    for (bool emulated : {false, true}) {
      const std::vector<double> e =
          RunPercents(results, emulated, "simulator_error_at_measured_compute");
      if (!e.empty()) {
        at_speed.push_back(absl::StrCat(RangeText(e, "%.0f%%"),
                                        emulated ? " emulated" : " without link emulation"));
      }
    }
    if (!at_speed.empty()) {
      absl::StrAppend(&out, "; the plans simulated again at the compute speed each run "
                            "measured: median |error| ", absl::StrJoin(at_speed, ", "));
    }
    std::vector<std::string> slowest;
    for (bool emulated : {false, true}) {
      const std::vector<double> e =
          RunPercents(results, emulated, "simulator_error_at_slowest_device");
      const std::vector<double> h =
          RunPercents(results, emulated, "simulator_error_at_slowest_device", "harmony");
      const std::vector<double> waits =
          RunPercents(results, emulated, "peer_wait_share", "harmony");
      if (e.empty()) continue;
      slowest.push_back(absl::StrCat(
          RangeText(e, "%.0f%%"), emulated ? " emulated" : " without link emulation",
          h.empty() ? "" : absl::StrCat(" (Harmony's ", RangeText(h, "%.0f%%"), ")"),
          waits.empty() ? ""
                        : absl::StrCat(", Harmony's devices waiting for each other ",
                                       RangeText(waits, "%.1f%%"), " of their time")));
    }
    if (!slowest.empty()) {
      absl::StrAppend(&out, "; at the speed of each run's slowest device: median |error| ",
                      absl::StrJoin(slowest, "; "));
    }
    out += ".\n";
  }
  absl::StrAppend(&out, report::AccuracyBarText(results));
  if (results.contains("overhead")) {
    const json& o = results["overhead"];
    absl::StrAppendFormat(&out,
                          "- **Overhead when the model fits** (1 device, no cap): Harmony runs at "
                          "%.2fx the plain LibTorch loop's samples/s.\n",
                          o["ratio"].get<double>());
  }
  if (results.contains("optimizer")) {
    std::vector<std::string> parts;
    for (const json& r : results["optimizer"]["rows"]) {
      parts.push_back(absl::StrFormat("%s %.1fx", r["optimizer"].get<std::string>(),
                                      r["speedup"].get<double>()));
    }
    absl::StrAppend(&out, "- **CPU optimizer** vs torch::optim over 100M parameters: ",
                    absl::StrJoin(parts, ", "), ".\n");
  }
  if (results.contains("planner")) {
    std::vector<std::string> parts;
    for (const json& r : results["planner"]["rows"]) {
      parts.push_back(absl::StrCat(r["vlayers"].get<int>(), " vLayers ",
                                   Seconds(r["seconds"]["median"].get<double>())));
    }
    absl::StrAppend(&out, "- **Planner search** on 4 devices: ", absl::StrJoin(parts, ", "), ".\n");
  }
  return out;
}

absl::Status WriteReport(const json& results, const std::string& dir) {
  std::string md;
  const json& machine = results["machine"];
  absl::StrAppend(&md, "# Harmony benchmark report\n\n");
  absl::StrAppendFormat(
      &md,
      "Written by `scripts/bench.sh%s` (`tests/bench/`) on %s UTC in %.1f minutes; every figure "
      "below was measured in that one run (medians of %d timed runs after %d untimed warm-up "
      "iteration(s), with min and max). Rerun it to refresh this file; nothing here is edited by hand. The "
      "machine-readable results are in [results.json](results.json).\n\n",
      results.value("quick", false) ? " --quick" : "", machine.value("date_utc", "?"),
      results.value("duration_s", 0.0) / 60, results.value("runs", 0),
      results.value("warmups", 1));
  if (results.value("quick", false)) {
    absl::StrAppend(&md, "**Quick mode**: smaller inputs (gpt sequences of 8 tokens, resnet "
                         "images of 8x8), emulated-link rows for minibatches 16 and 64 only, the "
                         "planner up to 200 vLayers, external models at minibatch 16. The full run (`scripts/bench.sh`) uses the sizes the "
                         "issue names.\n\n");
  }
  absl::StrAppendFormat(&md,
                        "**Machine**: %d cores (%s), %s of memory, %s; the bench's own loops on %d "
                        "threads, each device on its share of the cores. "
                        "No GPU: devices are virtual CPU devices with hard memory caps "
                        "(docs/DESIGN.md §6), so compute, copies and the optimizer share these cores. "
                        "Denormal floats %s (`--flush-denormal`; the README's \"Denormal "
                        "numbers\").\n\n",
                        machine.value("cores", 0), machine.value("cpu_model", "?"),
                        Bytes(machine.value("memory_bytes", 0.0)), machine.value("kernel", "?"),
                        results.value("threads", 0),
                        !results.contains("flush_denormal")
                            ? "computed (runs before the policy existed)"
                        : results["flush_denormal"].get<bool>()
                            ? "flushed to zero on every thread that computes"
                            : "computed, not flushed");
  absl::StrAppend(&md, "## Headline\n\n", Headline(results), "\n");
  // --- 1-3.
  absl::Status schedules = report::AppendScheduleSections(results, dir, &md);
  if (!schedules.ok()) return schedules;

  if (results.contains("denormals")) {
    const json& d = results["denormals"];
    absl::StrAppendFormat(
        &md,
        "## Denormal numbers\n\n"
        "zoo %s%s on %d devices, "
        "minibatch %d, over the emulated link, on %s: profiled, planned and trained by Harmony "
        "with denormals computed and with them flushed to zero (FTZ/DAZ on every thread that "
        "computes), the plain LibTorch loop beside each under the same policy. Many x86 cores "
        "compute denormals far slower (an Intel Xeon ran zoo vgg's plain loop 9.6x slower "
        "computing them); the profiler times each backward on the model's own gradients, so "
        "that its times hold under either policy.\n\n"
        "| denormals | Harmony iteration | simulated | error | compute, measured ÷ profiled | "
        "profiled again around the run: simulated (error) | compute ÷ those times | error at "
        "the run's compute speed | plain loop |\n|---|---|---|---|---|---|---|---|---|\n",
        d["model"].get<std::string>(),
        d["model"] == "vgg" ? " (a deep plain conv stack: its backward makes denormal gradients)"
                            : "",
        d["devices"].get<int>(), d["minibatch"].get<int>(), d["cpu_model"].get<std::string>());
    for (const json& r : d["runs"]) {
      const char* own = "simulator_error_at_measured_compute";
      absl::StrAppendFormat(&md, "| %s | %s | %s | %+.0f%% | %.2fx | %s | %s | %s |\n",
                            r["flush_denormal"].get<bool>() ? "flushed" : "computed",
                            TimeCell(r["iteration_s"]), Seconds(r["simulated_s"].get<double>()),
                            100 * r["simulator_error"].get<double>(),
                            r["compute_ratio"].get<double>(), report::RetimedCells(r),
                            r.contains(own) ? absl::StrFormat("%+.0f%%", 100 * r[own].get<double>())
                                            : "n/a",
                            TimeCell(r["plain_loop_iteration_s"]));
    }
    md += "\n";
  }

  if (results.contains("clipping")) {
    const json& c = results["clipping"];
    absl::StrAppendFormat(
        &md,
        "## Gradient clipping\n\n"
        "zoo %s on %d devices of %s (%s), minibatch %d, over the emulated link, on %s: Harmony "
        "without clipping, with clipping that never fires (max norm 1e9) and with clipping "
        "that fires every iteration (1e-6), its updates speculating (stepped before the norm "
        "is known, redone from a saved copy when it fires) or held until every backward is "
        "done; %d rounds of every variant in turn, each with its warm-up and timed iterations; "
        "÷ off is the median over the rounds of the variant's median over off's in the same "
        "round. The simulated column is the plan's (Estimates.clip_*).\n\n"
        "| clipping | iteration | ÷ off (paired) | simulated | error | clipped / redone |\n"
        "|---|---|---|---|---|---|\n",
        c["model"].get<std::string>(), c["devices"].get<int>(),
        common::FormatBytes(c["device_memory"].get<uint64_t>()), c["mode"].get<std::string>(),
        c["minibatch"].get<int>(), c["cpu_model"].get<std::string>(), c.value("rounds", 3));
    for (const json& r : c["variants"]) {
      absl::StrAppendFormat(&md, "| %s | %s | %.3fx | %s | %+.0f%% | %d / %d |\n",
                            r["name"].get<std::string>(), TimeCell(r["iteration_s"]),
                            r["vs_off"].get<double>(), Seconds(r["simulated_s"].get<double>()),
                            100 * r["simulator_error"].get<double>(),
                            r["clipped_iterations"].get<int>(), r["redone_iterations"].get<int>());
    }
    md += "\n";
  }

  if (results.contains("precision")) {
    const json& p = results["precision"];
    const json& f = p["cpu_features"];
    absl::StrAppendFormat(
        &md,
        "## Mixed precision\n\n"
        "Harmony's fp32 plan and bf16 plan (harmony-plan --precision bf16: bf16 weights and "
        "gradients on the devices and the link, autocast compute, fp32 masters and optimizer "
        "on the host) of each model on 2 devices of a quarter of its fp32 weights, each searched "
        "for its precision, a bf16 plan pinned to the fp32 plan's mode, microbatch and packs, and "
        "a bf16 plan with fp32 gradients (--grad-precision fp32, searched); rounds of the four in "
        "turn, speeds paired within a round. On %s (avx512_bf16: %s, "
        "amx_bf16: %s).\n\n"
        "| model | link | precision | plan | host link / iteration | samples/s | simulated "
        "error | compute ÷ profile | bytes ÷ fp32 | speed ÷ fp32 |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n",
        p["cpu_model"].get<std::string>(), f["avx512_bf16"].get<bool>() ? "yes" : "no",
        f["amx_bf16"].get<bool>() ? "yes" : "no");
    for (const json& c : p["configs"]) {
      const std::string link = absl::StrCat(
          Bytes(c["emulated_link_bytes_per_s"].get<double>()), "/s");
      if (c.contains("skipped")) {
        absl::StrAppendFormat(&md, "| %s | %s | | not planned: %s | | | | | | |\n",
                              c["model"].get<std::string>(), link,
                              c["skipped"].get<std::string>());
        continue;
      }
      for (const json& r : c["runs"]) {
        const std::string name = r.value("name", r["precision"].get<std::string>());
        const bool fp32 = name == "fp32";
        const bool pinned = name == "bf16, fp32's schedule";
        const bool fp32_gradients = name == "bf16, fp32 gradients";
        const double f0 = c["runs"][0]["host_link_bytes"].get<double>();
        absl::StrAppendFormat(
            &md, "| %s | %s | %s | %s, u %d | %s | %.1f | %+.0f%% | %.2f | %s | %s |\n",
            c["model"].get<std::string>(), link, name, r["mode"].get<std::string>(),
            r["backward_microbatch"].get<int>(),
            Bytes(r["host_link_bytes"].get<double>()), r["samples_per_s"].get<double>(),
            100 * r["simulator_error"].get<double>(), r["compute_ratio"].get<double>(),
            fp32 ? "" : absl::StrFormat("%.2fx", r["host_link_bytes"].get<double>() / f0),
            fp32 ? ""
                 : absl::StrFormat(
                       "%.2fx", (pinned ? c["same_schedule_speed_bf16_over_fp32"]
                                        : fp32_gradients ? c["fp32_gradients_speed_over_fp32"]
                                                         : c["speed_bf16_over_fp32"])
                                    .get<double>()));
      }
    }
    md += "\n";
  }

  // --- 4.
  if (results.contains("overhead")) {
    const json& o = results["overhead"];
    absl::StrAppendFormat(
        &md,
        "## 4. Overhead when the model fits\n\n"
        "zoo gpt, minibatch %d, one virtual device with memory to spare (no cap that forces "
        "swapping). Harmony's plan: %s, microbatch %d, %d backward pack(s); it still copies the "
        "weights to the device and runs the optimizer on the host (%s over the host link per "
        "iteration). The plain loop is the exactness tests' reference: LibTorch forward and "
        "backward over the same microbatches, then one torch::optim step.\n\n"
        "| | iteration | samples/s |\n|---|---|---|\n"
        "| Harmony | %s | %.1f |\n| plain LibTorch loop | %s | %.1f |\n\n"
        "Harmony ÷ plain loop samples/s: **%.2fx**.\n\n",
        o["minibatch"].get<int>(), o["mode"].get<std::string>(), o["microbatch"].get<int>(),
        o["backward_packs"].get<int>(), Bytes(o["swap_bytes"]["host_link"].get<double>()),
        TimeCell(o["harmony_iteration_s"]), o["harmony_samples_per_s"].get<double>(),
        TimeCell(o["plain_loop_iteration_s"]), o["plain_loop_samples_per_s"].get<double>(),
        o["ratio"].get<double>());
  }

  // --- 5.
  if (results.contains("optimizer")) {
    const json& o = results["optimizer"];
    absl::StrAppendFormat(
        &md,
        "## 5. CPU optimizer\n\n"
        "One step over %.0fM fp32 parameters on %d threads: Harmony's fused optimizer "
        "(optim/) against torch::optim on the same tensors (after the same steps both "
        "hold the same weights: checked). Memory bandwidth for scale: a STREAM-style copy "
        "moves %s (%s per copy of 400 MB).\n\n"
        "| optimizer | Harmony step | updates/s | torch::optim step | updates/s | speedup | "
        "Harmony bytes/s | of copy bandwidth |\n|---|---|---|---|---|---|---|---|\n",
        o["parameters"].get<double>() / 1e6, o["threads"].get<int>(),
        common::FormatBandwidth(o["copy_bytes_per_s"].get<double>()),
        TimeCell(o["copy_seconds"]));
    BarChart chart;
    chart.title = "CPU optimizer, 100M parameters";
    chart.y_label = "million updates per second";
    chart.series = {{"Harmony", {}}, {"torch::optim", {}}};
    for (const json& r : o["rows"]) {
      absl::StrAppendFormat(&md, "| %s | %s | %.0fM | %s | %.0fM | %.2fx | %s | %.0f%% |\n",
                            r["optimizer"].get<std::string>(), TimeCell(r["harmony_seconds"]),
                            r["harmony_updates_per_s"].get<double>() / 1e6,
                            TimeCell(r["torch_seconds"]),
                            r["torch_updates_per_s"].get<double>() / 1e6,
                            r["speedup"].get<double>(),
                            common::FormatBandwidth(r["harmony_bytes_per_s"].get<double>()),
                            100 * r["fraction_of_copy"].get<double>());
      chart.categories.push_back(r["optimizer"]);
      chart.series[0].values.push_back(r["harmony_updates_per_s"].get<double>() / 1e6);
      chart.series[1].values.push_back(r["torch_updates_per_s"].get<double>() / 1e6);
    }
    absl::Status w =
        common::WriteFileAtomically(absl::StrCat(dir, "/optimizer.svg"), DrawBarChart(chart));
    if (!w.ok()) return w;
    absl::StrAppend(&md, "\nBytes per update: SGD-momentum reads weight, gradient and momentum "
                         "and writes weight and momentum (20 B); Adam and AdamW two moments "
                         "(28 B).\n\n![optimizer](optimizer.svg)\n\n");
  }

  // --- 6.
  if (results.contains("planner")) {
    const json& p = results["planner"];
    absl::StrAppendFormat(
        &md,
        "## 6. Planner scaling\n\n"
        "Schedule search (mode, microbatch sizes, packs; every candidate simulated unless its "
        "busiest device's compute alone is slower than what was found: skipped) for "
        "profiles synthesized from the measured zoo gpt profile (its block repeated), on %d "
        "devices of %s, minibatch %d.\n\n"
        "| vLayers | search time | configurations simulated | fit | skipped by their compute | "
        "chosen |\n"
        "|---|---|---|---|---|---|\n",
        p["devices"].get<int>(), Bytes(p["device_memory"].get<double>()),
        p["minibatch"].get<int>());
    BarChart chart;
    chart.title = "Planner search time, 4 devices";
    chart.y_label = "seconds";
    chart.series = {{"search", {}}};
    for (const json& r : p["rows"]) {
      absl::StrAppendFormat(&md, "| %d | %s | %d | %d | %d | %s, microbatch %d, %d backward packs |\n",
                            r["vlayers"].get<int>(), TimeCell(r["seconds"]),
                            r["candidates"].get<int>(), r["feasible"].get<int>(),
                            r.value("pruned_configs", 0),
                            r["mode"].get<std::string>(), r["microbatch"].get<int>(),
                            r["backward_packs"].get<int>());
      chart.categories.push_back(absl::StrCat(r["vlayers"].get<int>(), " vLayers"));
      chart.series[0].values.push_back(r["seconds"]["median"].get<double>());
    }
    absl::Status w =
        common::WriteFileAtomically(absl::StrCat(dir, "/planner.svg"), DrawBarChart(chart));
    if (!w.ok()) return w;
    absl::StrAppend(&md, "\n![planner](planner.svg)\n\n");
  }

  // --- 7.
  if (results.contains("external")) {
    absl::StrAppend(
        &md,
        "## 7. External models\n\n"
        "Models written the way PyTorch users write them and saved with torch.jit.script "
        "(tests/testdata/make_python_models.py), planned for 2 virtual devices of the "
        "model's weight size (raised 1.5x until a plan fits) and trained. Plan time = "
        "profiling on the devices + the search. The losses equal the plain loop's (checked).\n\n"
        "| model | vLayers | weights | devices | minibatch | plan (profile + search) | profile | "
        "search | plan chosen | iteration | samples/s | simulated | host link bytes |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const json& r : results["external"]["rows"]) {
      absl::StrAppendFormat(
          &md, "| %s (%s) | %d | %s | 2 x %s | %d | %s | %s | %s | %s, u=%d, %d packs | %s | %.1f | %s | %s |\n",
          r["model"].get<std::string>(), r["what"].get<std::string>(), r["vlayers"].get<int>(),
          Bytes(r["weight_bytes"].get<double>()), Bytes(r["device_memory"].get<double>()),
          r["minibatch"].get<int>(), TimeCell(r["plan_s"]), TimeCell(r["profile_s"]),
          TimeCell(r["search_s"]), r["mode"].get<std::string>(), r["microbatch"].get<int>(),
          r["backward_packs"].get<int>(), TimeCell(r["iteration_s"]),
          r["samples_per_s"].get<double>(), Seconds(r["simulated_s"].get<double>()),
          Bytes(r["swap_bytes"]["host_link"].get<double>()));
    }
    md += "\n";
  }

  // --- 8.
  if (results.contains("world")) {
    const json& w = results["world"];
    absl::StrAppendFormat(
        &md,
        "## 8. Several servers (data parallel on loopback)\n\n"
        "A world of %d servers on this machine: each a runtime with one virtual device of %s "
        "(the model has %s of weights: it swaps) computing on one core, minibatch %d each "
        "(%s, microbatch %d), SGD with momentum; gradients summed through c10d Gloo over "
        "loopback (measured here: %s per allreduce stream, %s per message; the plan is "
        "made with `--servers %d` on these figures). \"Side by side\" runs the same %d "
        "servers at once without joining them: what sharing this machine's cores costs by "
        "itself, so world / side by side is the exchange's own cost. Sent bytes are what the "
        "process wrote to its sockets (/proc/self/io wchar) in the timed iterations, per "
        "server; the bound is a ring allreduce's 2 (S - 1) / S x the gradient bytes.\n\n"
        "| | iteration | simulated | error |\n|---|---|---|---|\n"
        "| one server | %s | %s | %+.0f%% |\n"
        "| %d servers side by side, not joined | %s | | |\n"
        "| world of %d | %s | %s | %+.0f%% |\n\n"
        "World / one server: %.2fx; world / side by side: %.2fx (ideal 1.00 for both: weak "
        "scaling, each server trains the same minibatch). Sent per server per iteration: %s, "
        "%.2fx the ring bound of %s (gradients %s). The ranks' weights ended identical: %s.\n\n",
        w["servers"].get<int>(), Bytes(w["device_memory_bytes"].get<double>()),
        Bytes(w["weight_bytes"].get<double>()), w["minibatch_per_server"].get<int>(),
        w["mode"].get<std::string>(), w["microbatch"].get<int>(),
        common::FormatBandwidth(w["network_bytes_per_s"].get<double>()),
        Seconds(w["network_latency_s"].get<double>()), w["servers"].get<int>(),
        w["servers"].get<int>(), TimeCell(w["one_server_iteration_s"]),
        Seconds(w["one_server_simulated_s"].get<double>()),
        100 * w["one_server_sim_error"].get<double>(), w["servers"].get<int>(),
        TimeCell(w["side_by_side_iteration_s"]), w["servers"].get<int>(),
        TimeCell(w["world_iteration_s"]), Seconds(w["world_simulated_s"].get<double>()),
        100 * w["world_sim_error"].get<double>(), w["world_over_one"].get<double>(),
        w["world_over_side_by_side"].get<double>(),
        Bytes(w["sent_bytes_per_server_per_iteration"].get<double>()),
        w["sent_over_bound"].get<double>(), Bytes(w["ring_allreduce_bound_bytes"].get<double>()),
        Bytes(w["gradient_bytes"].get<double>()),
        w["ranks_identical"].get<bool>() ? "yes, bit for bit" : "NO");
  }

  // --- Checks.
  int passed = 0;
  std::vector<std::string> failed;
  for (const json& c : results.value("checks", json::array())) {
    if (c["ok"].get<bool>()) {
      ++passed;
    } else {
      failed.push_back(absl::StrCat("- ", c["name"].get<std::string>(), ": ",
                                    c["detail"].get<std::string>()));
    }
  }
  absl::StrAppendFormat(&md,
                        "## Correctness checks\n\n%d passed, %d failed: every run's per-iteration "
                        "losses equal the plain LibTorch loop's over the same microbatches "
                        "(relative 1e-5); for zoo gpt (no batch statistics) every schedule's "
                        "losses equal Harmony's (relative 1e-4); the CPU optimizer's weights "
                        "equal torch::optim's (1e-6 of the largest weight).\n",
                        passed, static_cast<int>(failed.size()));
  if (!failed.empty()) absl::StrAppend(&md, "\n", absl::StrJoin(failed, "\n"), "\n");
  if (results.contains("discussion")) absl::StrAppend(&md, "\n", results["discussion"].get<std::string>());
  return common::WriteFileAtomically(absl::StrCat(dir, "/REPORT.md"), md);
}

}  // namespace harmony::bench
