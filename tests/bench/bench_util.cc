#include "tests/bench/bench_util.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace harmony::bench {

Stats Summarize(std::vector<double> samples) {
  Stats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.median = n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  s.min = samples.front();
  s.max = samples.back();
  s.runs = static_cast<int>(n);
  return s;
}

nlohmann::json ToJson(const Stats& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"runs", s.runs}};
}

Stats StatsFromJson(const nlohmann::json& j) {
  Stats s;
  s.median = j.value("median", 0.0);
  s.min = j.value("min", 0.0);
  s.max = j.value("max", 0.0);
  s.runs = j.value("runs", 0);
  return s;
}

namespace {

// The value of a "key : value" line of a /proc file, or "".
std::string ProcField(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return "";
}

}  // namespace

nlohmann::json MachineInfo() {
  nlohmann::json m;
  m["cores"] = std::thread::hardware_concurrency();
  const std::string total = ProcField("/proc/meminfo", "MemTotal");  // "24570312 kB"
  m["memory_bytes"] = total.empty() ? 0 : std::stoull(total) * 1024;
  m["cpu_model"] = ProcField("/proc/cpuinfo", "model name");
  utsname u{};
  if (::uname(&u) == 0) m["kernel"] = absl::StrFormat("%s %s %s", u.sysname, u.release, u.machine);
  m["date_utc"] = absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::Now(), absl::UTCTimeZone());
  return m;
}

void Log(const std::string& line) {
  static std::mutex mu;
  static const Stopwatch start;
  std::lock_guard<std::mutex> lock(mu);
  std::cerr << absl::StrFormat("[%6.1fs] ", start.seconds()) << line << std::endl;
}

double RelativeDifference(double a, double b) {
  const double scale = std::max({std::fabs(a), std::fabs(b), 1e-30});
  return std::fabs(a - b) / scale;
}

double Unsteadiness(double after_vs_before, double compute_ratio, double spread) {
  double u = std::fabs(after_vs_before - 1) / kSteadyWithin;
  if (compute_ratio > 0) {
    u = std::max(u, compute_ratio < 1 ? (1 - compute_ratio) / (1 - kSteadyComputeLow)
                                      : (compute_ratio - 1) / (kSteadyComputeHigh - 1));
  }
  return std::max(u, (spread - 1) / (kSteadySpread - 1));
}

}  // namespace harmony::bench
