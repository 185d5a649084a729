#include "tests/bench/report_format.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/units.h"
#include "tests/bench/bench_util.h"

namespace harmony::bench::report {

const std::vector<std::string> kBaselines = {"ondemand", "gpipe", "dp-swap"};
const std::vector<std::string> kSchedules = {"harmony", "ondemand", "gpipe", "dp-swap"};

std::string Bytes(double b) { return common::FormatBytes(static_cast<uint64_t>(b)); }

std::string Seconds(double s) {
  if (s < 1e-3) return absl::StrFormat("%.1f µs", s * 1e6);
  if (s < 1) return absl::StrFormat("%.1f ms", s * 1e3);
  return absl::StrFormat("%.2f s", s);
}

std::string TimeCell(const json& stats) {
  return absl::StrFormat("%s (%s–%s)", Seconds(stats["median"].get<double>()),
                         Seconds(stats["min"].get<double>()), Seconds(stats["max"].get<double>()));
}

const json* FindRun(const json& config, const std::string& schedule, bool emulated) {
  for (const json& r : config["runs"]) {
    if (r["schedule"] == schedule && r["emulated"].get<bool>() == emulated) return &r;
  }
  return nullptr;
}

const json* ByteRun(const json& config, const std::string& schedule) {
  const json* r = FindRun(config, schedule, false);
  return r ? r : FindRun(config, schedule, true);
}

double HostBytes(const json& run) { return run["swap_bytes"]["host_link"].get<double>(); }
double Rate(const json& run) { return run["samples_per_s"]["median"].get<double>(); }

std::string ConfigName(const json& c) {
  return absl::StrCat(c["model"].get<std::string>(), " N=", c["devices"].get<int>(),
                      " D=", c["minibatch"].get<int>(),
                      c.value("smaller_devices", false)
                          ? absl::StrCat(" on ", Bytes(c["device_memory"].get<double>()))
                          : "");
}

const json& Configs(const json& results) {
  static const json kEmpty = json::array();
  if (!results.contains("schedules")) return kEmpty;
  return results["schedules"]["configs"];
}

double ComputeRatio(const json& config, const json& run) {
  if (!run.contains("compute_s") || !run.contains("planned_compute_s")) return 0;
  const double planned = run["planned_compute_s"].get<double>();
  const int devices = std::max(1, config.value("devices", 1));
  return planned > 0 ? run["compute_s"].get<double>() / devices / planned : 0;
}

bool Unsteady(const json& retimed) {
  if (!retimed.contains("after_vs_before")) return false;
  return std::fabs(retimed["after_vs_before"].get<double>() - 1) > kSteadyWithin;
}

std::string RetimedCells(const json& run) {
  if (!run.contains("retimed")) return "n/a | n/a";
  const json& t = run["retimed"];
  std::string drift =
      t.contains("after_vs_before")
          ? absl::StrFormat("; after ÷ before %.2f%s", t["after_vs_before"].get<double>(),
                            Unsteady(t) ? ", **unsteady**" : "")
          : "";
  if (t.contains("timings")) {
    absl::StrAppend(&drift, absl::StrFormat("; timing %d of %d", t["kept_timing"].get<int>() + 1,
                                            static_cast<int>(t["timings"].size())));
  }
  return absl::StrFormat("%s (%+.0f%%%s) | %s", Seconds(t["simulated_s"].get<double>()),
                         100 * t["simulator_error"].get<double>(), drift,
                         t.contains("compute_ratio")
                             ? absl::StrFormat("%.2f", t["compute_ratio"].get<double>())
                             : std::string("n/a"));
}

std::string TimedAgainText(const json& results) {
  int runs = 0, timed_again = 0;
  for (const json& c : Configs(results)) {
    for (const json& r : c["runs"]) {
      if (!r.contains("retimed")) continue;
      ++runs;
      timed_again += r["retimed"].contains("timings");
    }
  }
  if (timed_again == 0) return "";
  return absl::StrFormat("; %d of %d runs timed again, the profiles around them more than %.0f%% "
                         "apart, the run's compute outside %.2f-%.2fx their times or its "
                         "slowest iteration over %.2fx its fastest (up to %d timings, the "
                         "steadiest kept)",
                         timed_again, runs, 100 * kSteadyWithin, kSteadyComputeLow,
                         kSteadyComputeHigh, kSteadySpread, kTimings);
}

std::string Emulated(const json& results) {
  if (!results.contains("link_balance")) return "?";
  return common::FormatBandwidth(results["link_balance"]["emulated_link_bytes_per_s"].get<double>());
}

}  // namespace harmony::bench::report
