// Shared pieces of the benchmarks (tests/bench): statistics over repeated
// runs, a stopwatch, the machine's description, progress lines.
//
// Thread-safety: stateless functions; Log may be called from any thread.

#ifndef HARMONY_TESTS_BENCH_BENCH_UTIL_H_
#define HARMONY_TESTS_BENCH_BENCH_UTIL_H_

#include <chrono>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace harmony::bench {

// The median, minimum and maximum of repeated measurements.
struct Stats {
  double median = 0;
  double min = 0;
  double max = 0;
  int runs = 0;
};

// Of `samples` (at least one; an even count takes the mean of the middle
// two).
Stats Summarize(std::vector<double> samples);
nlohmann::json ToJson(const Stats& stats);
Stats StatsFromJson(const nlohmann::json& json);

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// Runs `fn` `warmups` times untimed, then `runs` times; the seconds of each
// timed run.
template <typename Fn>
std::vector<double> TimeRuns(int warmups, int runs, Fn&& fn) {
  for (int i = 0; i < warmups; ++i) fn();
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    Stopwatch watch;
    fn();
    seconds.push_back(watch.seconds());
  }
  return seconds;
}

// Cores, memory, CPU model, kernel, LibTorch threads, the time (UTC).
nlohmann::json MachineInfo();

// One progress line on stderr, prefixed with the seconds since the first.
void Log(const std::string& line);

// The relative difference |a - b| / max(|a|, |b|, tiny).
double RelativeDifference(double a, double b);

// A run profiled again right before its timed iterations and right after
// them is unsteady when the profile after took more than this more or less
// than the one before: the machine's speed moved during the run, and no
// profile taken outside it can say how fast it ran (TrainWithPlan times such
// a run again; the report marks those still unsteady).
inline constexpr double kSteadyWithin = 0.15;
// Nor can they where the run computed outside this range of their times
// (the speed moved within the timed iterations: on 11-29 a run computed
// 1.48x the times of profiles 1.27x and 1.13x the first, docs/bench/intel/
// run8): timed again too.
inline constexpr double kSteadyComputeLow = 0.8, kSteadyComputeHigh = 1.25;
// Nor where the timed iterations spread more than this, the slowest over the
// fastest (the speed moved between them: on 11-29 a run's three took 1.70,
// 2.57 and 2.88 s while the profiles around them were 0.91x apart and its
// compute 1.22x their times, docs/bench/intel/run12): timed again too.
inline constexpr double kSteadySpread = 1.3;
// The simulator's accuracy the report's headline counts rows against: the
// simulated iteration within this share of the measured, Harmony's runs and
// the baselines', with the run's compute within kSteadyComputeLow-High of
// the profile's (the bar set for the vgg rows when denormals had made
// an Intel Xeon's runs 5-7x slower than profiled).
inline constexpr double kBarHarmony = 0.15, kBarBaselines = 0.20;
// At most this many timings of such a run.
inline constexpr int kTimings = 3;

// How far one timing is from steady: 1 at the edge of the limits above, more
// beyond (the largest of its three measures). `after_vs_before`: the profile
// after the timed iterations over the one before (1 when not profiled);
// `compute_ratio`: their compute over the profiles' times (0: unknown);
// `spread`: the slowest iteration over the fastest (1 for one or none).
double Unsteadiness(double after_vs_before, double compute_ratio, double spread);

}  // namespace harmony::bench

#endif  // HARMONY_TESTS_BENCH_BENCH_UTIL_H_
