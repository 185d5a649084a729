// Grouped bar charts as standalone SVG, for the benchmark report: one group
// of bars per category, one bar (and colour) per series, a linear or log10
// axis, optionally a dashed horizontal reference line (e.g. "1x").
//
// Thread-safety: stateless.

#ifndef HARMONY_TESTS_BENCH_SVG_CHART_H_
#define HARMONY_TESTS_BENCH_SVG_CHART_H_

#include <limits>
#include <string>
#include <vector>

namespace harmony::bench {

struct BarSeries {
  std::string name;
  // One per category; NaN leaves a gap.
  std::vector<double> values;
};

struct BarChart {
  std::string title;
  std::string y_label;
  std::vector<std::string> categories;
  std::vector<BarSeries> series;
  bool log_scale = false;
  double reference = std::numeric_limits<double>::quiet_NaN();
  std::string reference_label;
};

std::string DrawBarChart(const BarChart& chart);

}  // namespace harmony::bench

#endif  // HARMONY_TESTS_BENCH_SVG_CHART_H_
