#include "executor/runtime/trace.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace harmony::executor {

void TraceRecorder::Add(int device, TraceStream stream, std::string name, double start_s,
                        double end_s) {
  if (!on_) return;
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back({device, static_cast<int>(stream), std::move(name), start_s, end_s});
}

std::string TraceRecorder::ChromeJson(int devices, double link_bytes_per_s) const {
  nlohmann::json events = nlohmann::json::array();
  const char* names[] = {"swap-in", "swap-out", "compute", "peer", "weights-in"};
  for (int d = -1; d < devices; ++d) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", d + 1},
                      {"args", {{"name", d < 0 ? "host (CPU optimizer)"
                                               : absl::StrCat("device ", d)}}}});
    for (int s = 0; s < 5; ++s) {
      if (d < 0 && s != kCompute) continue;
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", d + 1}, {"tid", s},
                        {"args", {{"name", d < 0 ? "optimizer" : names[s]}}}});
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Event& e : events_) {
      events.push_back({{"name", e.name}, {"ph", "X"}, {"pid", e.device + 1},
                        {"tid", e.stream}, {"ts", e.start_s * 1e6},
                        {"dur", (e.end_s - e.start_s) * 1e6}});
    }
  }
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  if (link_bytes_per_s > 0) {
    doc["metadata"] = {{"host_link", "emulated"}, {"host_link_bytes_per_s", link_bytes_per_s}};
  }
  return doc.dump();
}

}  // namespace harmony::executor
