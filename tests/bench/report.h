// The benchmark report: docs/bench/REPORT.md and its SVG charts, made from
// results.json alone (so `harmony-bench --report-only` can redraw it).
//
// Thread-safety: stateless.

#ifndef HARMONY_TESTS_BENCH_REPORT_H_
#define HARMONY_TESTS_BENCH_REPORT_H_

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace harmony::bench {

// Writes REPORT.md and *.svg into `dir`.
absl::Status WriteReport(const nlohmann::json& results, const std::string& dir);

// The headline figures, a few lines of Markdown (also in REPORT.md).
std::string Headline(const nlohmann::json& results);

}  // namespace harmony::bench

#endif  // HARMONY_TESTS_BENCH_REPORT_H_
