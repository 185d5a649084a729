#include "tests/bench/svg_chart.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace harmony::bench {
namespace {

constexpr const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                    "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

std::string Escape(const std::string& text) {
  return absl::StrReplaceAll(text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}});
}

std::string Tick(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e9) return absl::StrFormat("%gG", v / 1e9);
  if (a >= 1e6) return absl::StrFormat("%gM", v / 1e6);
  if (a >= 1e3) return absl::StrFormat("%gk", v / 1e3);
  return absl::StrFormat("%g", v);
}

}  // namespace

std::string DrawBarChart(const BarChart& c) {
  const int groups = static_cast<int>(c.categories.size());
  const int bars = std::max<int>(1, static_cast<int>(c.series.size()));
  const double left = 70, right = 20, top = 40, bottom = 90;
  const double group_w = std::max(40.0, 14.0 * bars + 16);
  const double plot_w = std::max(300.0, group_w * groups);
  const double plot_h = 260;
  const double width = left + plot_w + right;
  const double legend_h = 18.0 * ((bars + 3) / 4);
  const double height = top + plot_h + bottom + legend_h;

  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const BarSeries& s : c.series) {
    for (double v : s.values) {
      if (std::isnan(v) || (c.log_scale && v <= 0)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (!std::isnan(c.reference)) {
    hi = std::max(hi, c.reference);
    lo = std::min(lo, c.reference);
  }
  if (!(hi > 0)) hi = 1;
  if (!std::isfinite(lo) || lo <= 0) lo = hi / 10;
  double y0 = 0, y1 = hi * 1.1;
  if (c.log_scale) {
    y0 = std::floor(std::log10(lo));
    y1 = std::ceil(std::log10(hi));
    if (y1 <= y0) y1 = y0 + 1;
  }
  auto y_of = [&](double v) {
    const double t = c.log_scale ? (std::log10(std::max(v, 1e-300)) - y0) / (y1 - y0)
                                 : (v - y0) / (y1 - y0);
    return top + plot_h * (1 - std::clamp(t, 0.0, 1.0));
  };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.0f\" y=\"20\" font-size=\"14\" font-weight=\"bold\">%s</text>\n",
      width, height, left, Escape(c.title));
  // Axis and grid.
  std::vector<double> ticks;
  if (c.log_scale) {
    for (double e = y0; e <= y1 + 1e-9; e += 1) ticks.push_back(std::pow(10.0, e));
  } else {
    const double raw = (y1 - y0) / 5;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
    for (double v = 0; v <= y1 + 1e-12; v += step) ticks.push_back(v);
  }
  for (double v : ticks) {
    const double y = y_of(v);
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                          "stroke=\"#ddd\"/>\n<text x=\"%.1f\" y=\"%.1f\" "
                          "text-anchor=\"end\">%s</text>\n",
                          left, y, left + plot_w, y, left - 5, y + 4, Tick(v));
  }
  absl::StrAppendFormat(&svg,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n"
                        "<text transform=\"translate(14,%.1f) rotate(-90)\" "
                        "text-anchor=\"middle\">%s</text>\n",
                        left, top, left, top + plot_h, top + plot_h / 2, Escape(c.y_label));
  // Bars.
  const double bar_w = (plot_w / std::max(groups, 1) - 16) / bars;
  for (int g = 0; g < groups; ++g) {
    const double gx = left + g * plot_w / groups + 8;
    for (int s = 0; s < static_cast<int>(c.series.size()); ++s) {
      const auto& values = c.series[s].values;
      if (g >= static_cast<int>(values.size())) continue;
      const double v = values[g];
      if (std::isnan(v) || (c.log_scale && v <= 0)) continue;
      const double y = y_of(v);
      absl::StrAppendFormat(&svg,
                            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                            "fill=\"%s\"><title>%s, %s: %g</title></rect>\n",
                            gx + s * bar_w, y, std::max(bar_w - 1, 1.0), top + plot_h - y,
                            kColours[s % 8], Escape(c.series[s].name),
                            Escape(c.categories[g]), v);
    }
    absl::StrAppendFormat(&svg,
                          "<text transform=\"translate(%.1f,%.1f) rotate(-35)\" "
                          "text-anchor=\"end\">%s</text>\n",
                          gx + (plot_w / groups - 16) / 2, top + plot_h + 14,
                          Escape(c.categories[g]));
  }
  absl::StrAppendFormat(&svg,
                        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
                        left, top + plot_h, left + plot_w, top + plot_h);
  if (!std::isnan(c.reference)) {
    const double y = y_of(c.reference);
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" "
                          "stroke-dasharray=\"5,4\"/>\n<text x=\"%.1f\" y=\"%.1f\" "
                          "text-anchor=\"end\">%s</text>\n",
                          left, y, left + plot_w, y, left + plot_w, y - 4,
                          Escape(c.reference_label));
  }
  // Legend.
  for (int s = 0; s < static_cast<int>(c.series.size()); ++s) {
    const double x = left + (s % 4) * 170;
    const double y = top + plot_h + bottom - 10 + 18 * (s / 4);
    absl::StrAppendFormat(&svg,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                          x, y - 10, kColours[s % 8], x + 16, y, Escape(c.series[s].name));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace harmony::bench
