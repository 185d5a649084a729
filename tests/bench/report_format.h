// Internal to the benchmark report (report.cc, report_schedules.cc): the
// schedules the report compares, finding a configuration's runs in
// results.json, and the cells its tables print.
//
// Thread-safety: stateless.

#ifndef HARMONY_TESTS_BENCH_REPORT_FORMAT_H_
#define HARMONY_TESTS_BENCH_REPORT_FORMAT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "tests/bench/bench_util.h"

namespace harmony::bench::report {

using nlohmann::json;

// The baselines, and Harmony with them, in the order of the tables.
extern const std::vector<std::string> kBaselines;
extern const std::vector<std::string> kSchedules;

// "1.23 MiB"; "12.3 ms" (µs, ms or s by size).
std::string Bytes(double b);
std::string Seconds(double s);
// "median (min–max)" of a Stats object in seconds.
std::string TimeCell(const json& stats);

// Configuration `config`'s run of `schedule` with or without the emulated
// link, or nullptr.
const json* FindRun(const json& config, const std::string& schedule, bool emulated);
// The run whose bytes stand for `schedule`'s plan: bytes depend on the plan,
// not on the link, so the run without emulation, else the emulated one (the
// full form runs emulated only).
const json* ByteRun(const json& config, const std::string& schedule);
// A run's bytes over the host link per iteration; its median samples/s.
double HostBytes(const json& run);
double Rate(const json& run);

// "gpt N=2 D=64".
std::string ConfigName(const json& c);
// The schedules' configurations (an empty array when there are none).
const json& Configs(const json& results);
// The runtime's compute per device over the profile's for the same work
// (the plan's microbatches and packs); 0 when the run lacks either.
double ComputeRatio(const json& config, const json& run);
// A run profiled again around it ("retimed") is unsteady when the profile
// after it took more than kSteadyWithin (bench_util.h) more or less than the
// one before.
bool Unsteady(const json& retimed);
// Two table cells for a run profiled again around it ("retimed"):
// "1.40 s (+2%; after ÷ before 1.03) | 0.97" (the plan simulated with those
// times, its error, the two profiles' ratio, marked **unsteady** past
// kSteadyWithin, "; timing 2 of 2" where it was timed again; the run's
// compute over those times), or "n/a | n/a".
std::string RetimedCells(const json& run);
// "; 2 of 8 runs timed again, ..." where the bench timed runs again
// (TrainWithPlan: the machine's speed moved during them), else "".
std::string TimedAgainText(const json& results);
// The emulated link's bandwidth, "215.58 MB/s" ("?" when not recorded).
std::string Emulated(const json& results);

// The headline's "Accuracy bar" line: how many timed rows (schedules, one
// pass, denormals) the simulator predicted within kBarHarmony or
// kBarBaselines at compute kSteadyComputeLow-High, against the up-front
// profile, the profiles around each run and each run's own compute speed,
// naming those that missed; "" without rows (report_bar.cc).
std::string AccuracyBarText(const json& results);

// Sections 1-3 (swap bytes, throughput, simulator accuracy) appended to
// `md`, their charts written into `dir` (report_schedules.cc).
absl::Status AppendScheduleSections(const json& results, const std::string& dir,
                                    std::string* md);

}  // namespace harmony::bench::report

#endif  // HARMONY_TESTS_BENCH_REPORT_FORMAT_H_
