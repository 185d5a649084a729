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
#include "tests/bench/svg_chart.h"

namespace harmony::bench {
namespace {

using nlohmann::json;

const std::vector<std::string> kBaselines = {"ondemand", "gpipe", "dp-swap"};
const std::vector<std::string> kSchedules = {"harmony", "ondemand", "gpipe", "dp-swap"};
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string Bytes(double b) { return common::FormatBytes(static_cast<uint64_t>(b)); }

std::string Seconds(double s) {
  if (s < 1e-3) return absl::StrFormat("%.1f µs", s * 1e6);
  if (s < 1) return absl::StrFormat("%.1f ms", s * 1e3);
  return absl::StrFormat("%.2f s", s);
}

// "median (min–max)" of a Stats object in seconds.
std::string TimeCell(const json& stats) {
  return absl::StrFormat("%s (%s–%s)", Seconds(stats["median"].get<double>()),
                         Seconds(stats["min"].get<double>()), Seconds(stats["max"].get<double>()));
}

std::string RateCell(const json& stats) {
  return absl::StrFormat("%.1f (%.1f–%.1f)", stats["median"].get<double>(),
                         stats["min"].get<double>(), stats["max"].get<double>());
}

std::string RangeText(const std::vector<double>& v, const char* format = "%.1fx") {
  if (v.empty()) return "n/a";
  const Stats s = Summarize(v);
  if (s.runs == 1) return absl::StrFormat(format, s.median);
  return absl::StrCat(absl::StrFormat(format, s.median), " (",
                      absl::StrFormat(format, s.min), "–", absl::StrFormat(format, s.max), ")");
}

const json* FindRun(const json& config, const std::string& schedule, bool emulated) {
  for (const json& r : config["runs"]) {
    if (r["schedule"] == schedule && r["emulated"].get<bool>() == emulated) return &r;
  }
  return nullptr;
}

// The run whose bytes stand for `schedule`'s plan: bytes depend on the plan,
// not on the link, so the run without emulation, else the emulated one (the
// full form runs emulated only).
const json* ByteRun(const json& config, const std::string& schedule) {
  const json* r = FindRun(config, schedule, false);
  return r ? r : FindRun(config, schedule, true);
}

// ", N% reserved" when the run's plan had to leave more than the default
// 10% of the device free; "" otherwise.
// The cell of a schedule that has no run in configuration `c`: "does not
// fit" where its planner found no plan for the devices, else "n/a".
std::string Missing(const json& c, const std::string& schedule) {
  return c.contains("unplanned") && c["unplanned"].contains(schedule) ? "does not fit" : "n/a";
}

std::string ReserveNote(const json& run) {
  const double reserve = run.value("memory_reserve", 0.1);
  return reserve > 0.15 ? absl::StrFormat(", %.0f%% reserved", 100 * reserve) : "";
}

double HostBytes(const json& run) { return run["swap_bytes"]["host_link"].get<double>(); }
double Rate(const json& run) { return run["samples_per_s"]["median"].get<double>(); }

std::string ConfigName(const json& c) {
  return absl::StrCat(c["model"].get<std::string>(), " N=", c["devices"].get<int>(),
                      " D=", c["minibatch"].get<int>());
}

const json& Configs(const json& results) {
  static const json kEmpty = json::array();
  if (!results.contains("schedules")) return kEmpty;
  return results["schedules"]["configs"];
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

std::vector<double> SimErrors(const json& results, bool emulated) {
  std::vector<double> v;
  for (const json& c : Configs(results)) {
    for (const json& r : c["runs"]) {
      if (r["emulated"].get<bool>() == emulated) {
        v.push_back(100 * std::fabs(r["simulator_error"].get<double>()));
      }
    }
  }
  return v;
}

// The runtime's compute per device over the profile's for the same work
// (the plan's microbatches and packs); 0 when the run lacks either.
double ComputeRatio(const json& config, const json& run) {
  if (!run.contains("compute_s") || !run.contains("planned_compute_s")) return 0;
  const double planned = run["planned_compute_s"].get<double>();
  const int devices = std::max(1, config.value("devices", 1));
  return planned > 0 ? run["compute_s"].get<double>() / devices / planned : 0;
}

std::vector<double> ComputeRatios(const json& results) {
  std::vector<double> v;
  for (const json& c : Configs(results)) {
    for (const json& r : c["runs"]) {
      if (double ratio = ComputeRatio(c, r); ratio > 0) v.push_back(ratio);
    }
  }
  return v;
}

std::string Emulated(const json& results) {
  if (!results.contains("link_balance")) return "?";
  return common::FormatBandwidth(results["link_balance"]["emulated_link_bytes_per_s"].get<double>());
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
    std::vector<double> weights;
    for (const json& c : Configs(results)) {
      const json* h = ByteRun(c, "harmony");
      const json* od = ByteRun(c, "ondemand");
      if (!h || !od) continue;
      auto w = [](const json& r) {
        return r["swap_bytes"]["weights_in"].get<double>() +
               r["swap_bytes"]["gradients_out"].get<double>();
      };
      if (w(*h) > 0) weights.push_back(w(*od) / w(*h));
    }
    const std::vector<double> all = ByteRatios(results, "ondemand");
    const double median = all.empty() ? 0 : Summarize(all).median;
    absl::StrAppend(
        &out, "- **Against the paper's two orders of magnitude**: weights and gradients alone, "
              "on-demand swapping moves ", RangeText(weights), " Harmony's; all bytes, ",
        RangeText(all), median >= 100 ? ": as the paper reports.\n"
                                      : ": short of it. Activation stashes, which every schedule "
                                        "moves alike, dominate these small models' traffic; the "
                                        "saving is in the weights.\n");
    for (bool emulated : {false, true}) {
      if (SimErrors(results, emulated).empty()) continue;  // No runs in this mode.
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
    if (!SimErrors(results, false).empty()) {
      errors.push_back(
          absl::StrCat(RangeText(SimErrors(results, false), "%.0f%%"), " without link emulation"));
    }
    if (!SimErrors(results, true).empty()) {
      errors.push_back(absl::StrCat(RangeText(SimErrors(results, true), "%.0f%%"), " emulated"));
    }
    absl::StrAppend(&out, "- **Simulator**: median |error| of the simulated iteration time ",
                    absl::StrJoin(errors, ", "));
    if (!ComputeRatios(results).empty()) {
      absl::StrAppend(&out, "; the runtime's compute per device was ",
                      RangeText(ComputeRatios(results), "%.2fx"),
                      " the profile's for the same work (far from 1.00x: the machine ran at "
                      "another speed than when it was profiled)");
    }
    out += ".\n";
  }
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
                        "(DESIGN.md §6), so compute, copies and the optimizer share these cores.\n\n",
                        machine.value("cores", 0), machine.value("cpu_model", "?"),
                        Bytes(machine.value("memory_bytes", 0.0)), machine.value("kernel", "?"),
                        results.value("threads", 0));
  absl::StrAppend(&md, "## Headline\n\n", Headline(results), "\n");

  // --- 1-3.
  if (!Configs(results).empty()) {
    absl::StrAppendFormat(
        &md,
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
              "even at microbatch 1 shows \"does not fit\" and is not run");
    const json& configs = Configs(results);
    for (size_t i = 0; i < configs.size(); ++i) {
      const json& c = configs[i];
      const std::string model = c["model"];
      if (i == 0 || configs[i - 1]["model"] != model) {
        const json& z = c["zoo"];
        absl::StrAppendFormat(
            &md,
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
      absl::StrAppendFormat(&md, "| %d | %d | %s | %s | %.1fx | %.1fx |\n",
                            c["devices"].get<int>(), c["minibatch"].get<int>(),
                            absl::StrJoin(cells, " | "), Bytes(lb),
                            h && od ? HostBytes(*od) / HostBytes(*h) : kNaN,
                            h ? HostBytes(*h) / lb : kNaN);
      if (i + 1 == configs.size() || configs[i + 1]["model"] != model) md += "\n";
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
        chart.categories.push_back(absl::StrCat("N=", c["devices"].get<int>(), " D=",
                                                c["minibatch"].get<int>()));
        for (size_t i = 0; i < kSchedules.size(); ++i) {
          const json* r = ByteRun(c, kSchedules[i]);
          chart.series[i].values.push_back(r ? HostBytes(*r) : kNaN);
        }
        chart.series.back().values.push_back(c["lower_bound_bytes"].get<double>());
      }
      const std::string file = absl::StrCat("swap_bytes_", model, ".svg");
      absl::Status w = common::WriteFileAtomically(absl::StrCat(dir, "/", file), DrawBarChart(chart));
      if (!w.ok()) return w;
      absl::StrAppend(&md, "![swap bytes, ", model, "](", file, ")\n\n");
    }

    absl::StrAppendFormat(
        &md,
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
        absl::StrAppendFormat(&md, "| %s | %s | %s | %s |\n", ConfigName(c),
                              emulated ? "**emulated**" : "none", absl::StrJoin(cells, " | "),
                              absl::StrJoin(ratios, " | "));
      }
    }
    md += "\n";
    absl::StrAppend(
        &md,
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
      // session 12 planned it at on-demand's own best, whatever was asked).
      const json* at_h = c.contains("ondemand_at_harmony_microbatch")
                             ? &c["ondemand_at_harmony_microbatch"]
                             : od;
      const double tod_h = at_h ? (*at_h)["iteration_s"]["median"].get<double>() : 0;
      absl::StrAppendFormat(
          &md,
          "| %s | %s (microbatch %d) | %s | %.2f | %s | %.2fx | %s (%d) | %s (%d) | %.2fx / "
          "%.2fx |\n",
          ConfigName(c), Seconds(th), (*h)["backward_microbatch"].get<int>(), Seconds(bound),
          th / bound, best_name, best > 0 ? best / th : kNaN, Seconds(tod),
          od ? (*od)["backward_microbatch"].get<int>() : 0, Seconds(tod_h),
          at_h ? (*at_h)["backward_microbatch"].get<int>() : 0, tod / th, tod_h / th);
    }
    md += "\n";
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
                        b.value("stash_in", 0.0) + b.value("data_in", 0.0);
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
          &md,
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
      absl::StrAppend(&md, "![", chart.title, "](", file, ")\n\n");
    }

    std::string latencies;
    for (const json& c : Configs(results)) {
      if (!c.contains("emulated_link_latency_s")) continue;
      absl::StrAppend(&latencies, latencies.empty() ? "" : ", ", ConfigName(c), " ",
                      Seconds(c["emulated_link_latency_s"].get<double>()));
    }
    absl::StrAppend(
        &md,
        "## 3. Simulator accuracy\n\n"
        "The planner's simulated iteration time (fed the profiled bandwidths, or the emulated "
        "link for emulated rows) against the measured median. Error = (simulated − measured) ÷ "
        "measured. The last column is the runtime's compute per device (summed over its "
        "vLayer invocations) over the profile's for the same work: where it is far from 1.00 "
        "the machine computed at another speed than when the model was profiled, and the "
        "error shows that rather than the schedule (a shared VM's speed can swing by tens of "
        "percent over minutes: docs/bench/scale.md).",
        latencies.empty()
            ? ""
            : absl::StrCat(" Emulated rows are planned with a fixed cost per host transfer, the "
                           "profile's hand-off to the copy thread plus what an emulated copy's "
                           "sleep oversleeps (harmony-plan --host-link-latency): ",
                           latencies, "."),
        "\n\n| config | link | schedule | simulated | measured | error | compute, measured ÷ "
        "profiled |\n"
        "|---|---|---|---|---|---|---|\n");
    for (bool emulated : {false, true}) {
      for (const json& c : Configs(results)) {
        for (const std::string& sched : kSchedules) {
          const json* r = FindRun(c, sched, emulated);
          if (!r) continue;
          const double compute = ComputeRatio(c, *r);
          absl::StrAppendFormat(&md, "| %s | %s | %s | %s | %s | %+.0f%% | %s |\n",
                                ConfigName(c), emulated ? "**emulated**" : "none", sched,
                                Seconds((*r)["simulated_s"].get<double>()),
                                Seconds((*r)["iteration_s"]["median"].get<double>()),
                                100 * (*r)["simulator_error"].get<double>(),
                                compute > 0 ? absl::StrFormat("%.2f", compute) : "n/a");
        }
      }
    }
    md += "\n";
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
    absl::StrAppend(&md, "![simulator error](simulator_error.svg)\n\n");
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
