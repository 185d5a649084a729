// The headline's accuracy bar: how many timed rows the simulator predicted
// within the bar, read against each of the profiles the bench takes.

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tests/bench/bench_util.h"
#include "tests/bench/report_format.h"

namespace harmony::bench::report {
namespace {

// One timed row: a schedules run, Harmony's run in one pass, a denormals run.
struct Row {
  std::string name;
  bool harmony = false;
  const json* run = nullptr;
  double compute_ratio = 0;  // Against the up-front profile; 0 when not recorded.
};

std::vector<Row> Rows(const json& results) {
  std::vector<Row> rows;
  for (const json& c : Configs(results)) {
    if (!c.contains("runs")) continue;
    for (const json& r : c["runs"]) {
      const std::string schedule = r.value("schedule", "?");
      rows.push_back({absl::StrCat(ConfigName(c), " ", schedule,
                                   r.value("emulated", true) ? "" : " (no link emulation)"),
                      schedule == "harmony", &r, ComputeRatio(c, r)});
    }
    if (c.contains("harmony_one_pass")) {
      const json& r = c["harmony_one_pass"];
      rows.push_back({absl::StrCat(ConfigName(c), " harmony in one pass"), true, &r,
                      ComputeRatio(c, r)});
    }
  }
  if (results.contains("denormals")) {
    for (const json& r : results["denormals"]["runs"]) {
      rows.push_back({absl::StrCat("denormals ", r.value("flush_denormal", false) ? "flushed"
                                                                                   : "computed"),
                      true, &r, r.value("compute_ratio", 0.0)});
    }
  }
  return rows;
}

// The three readings: against the profile the plan was made from (the
// row's compute ratio), against the profiles taken around the run (its
// "retimed" record), at the run's own compute speed (no compute ratio).
enum class Against { kUpFront, kAroundTheRun, kOwnSpeed };

// "7 of 8 rows (missed: NAME +27% at compute 0.78x)" over the rows that have
// the reading's figures; nullopt when none has.
std::optional<std::string> Reading(const std::vector<Row>& rows, Against against) {
  const char* error = against == Against::kOwnSpeed ? "simulator_error_at_measured_compute"
                                                    : "simulator_error";
  int met = 0, read = 0;
  std::vector<std::string> missed;
  for (const Row& row : rows) {
    const json& r = *row.run;
    if (against == Against::kAroundTheRun && !r.contains("retimed")) continue;
    const json& fields = against == Against::kAroundTheRun ? r["retimed"] : r;
    if (!fields.contains(error)) continue;
    const double ratio = against == Against::kUpFront        ? row.compute_ratio
                         : against == Against::kAroundTheRun ? fields.value("compute_ratio", 0.0)
                                                             : 1.0;
    if (!(ratio > 0)) continue;
    ++read;
    const double e = fields[error].get<double>();
    const double limit = row.harmony ? kBarHarmony : kBarBaselines;
    const bool speed = ratio >= kSteadyComputeLow && ratio <= kSteadyComputeHigh;
    if (std::fabs(e) <= limit && speed) {
      ++met;
      continue;
    }
    missed.push_back(absl::StrCat(row.name, " ", absl::StrFormat("%+.0f%%", 100 * e),
                                  against == Against::kOwnSpeed
                                      ? ""
                                      : absl::StrFormat(" at compute %.2fx", ratio)));
  }
  if (read == 0) return std::nullopt;
  std::string out = absl::StrCat(met, " of ", read, " rows");
  if (!missed.empty()) absl::StrAppend(&out, " (missed: ", absl::StrJoin(missed, "; "), ")");
  return out;
}

}  // namespace

std::string AccuracyBarText(const json& results) {
  const std::vector<Row> rows = Rows(results);
  if (rows.empty()) return "";
  std::vector<std::string> readings;
  auto add = [&](const char* against, std::optional<std::string> reading) {
    if (reading) readings.push_back(absl::StrCat(against, *reading));
  };
  add("against the profile the plans were made from, ", Reading(rows, Against::kUpFront));
  add("against the profiles taken right before and after each run, ",
      Reading(rows, Against::kAroundTheRun));
  add("at each run's own compute speed, ", Reading(rows, Against::kOwnSpeed));
  if (readings.empty()) return "";
  return absl::StrFormat(
      "- **Accuracy bar** (the runtime's compute %.2f-%.2fx the profile's and the simulated "
      "iteration within ±%.0f%% of the measured for Harmony, ±%.0f%% for the baselines): %s.\n",
      kSteadyComputeLow, kSteadyComputeHigh, 100 * kBarHarmony, 100 * kBarBaselines,
      absl::StrJoin(readings, "; "));
}

}  // namespace harmony::bench::report
