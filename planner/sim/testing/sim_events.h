// Looking up a simulation's events by name in tests of the simulator.
//
// Thread-safety: stateless.

#ifndef HARMONY_PLANNER_SIM_TESTING_SIM_EVENTS_H_
#define HARMONY_PLANNER_SIM_TESTING_SIM_EVENTS_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "planner/sim/simulator.h"

namespace harmony::planner::testing {

// The first event named `name` (on `device`, when given); a test failure
// and an empty event when there is none.
inline const TraceEvent& Event(const SimResult& r, const std::string& name, int device = -1) {
  for (const TraceEvent& e : r.events) {
    if (e.name == name && (device < 0 || e.device == device)) return e;
  }
  ADD_FAILURE() << "no event " << name << (device < 0 ? "" : absl::StrCat(" on device ", device));
  static const TraceEvent none;
  return none;
}

}  // namespace harmony::planner::testing

#endif  // HARMONY_PLANNER_SIM_TESTING_SIM_EVENTS_H_
