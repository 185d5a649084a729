#include "executor/jobs/job.h"

namespace harmony::executor {

namespace {
constexpr absl::string_view kNames[] = {"QUEUED",    "RUNNING", "CANCELLING",
                                        "SUCCEEDED", "FAILED",  "CANCELLED"};
}  // namespace

absl::string_view JobStateName(JobState state) { return kNames[static_cast<int>(state)]; }

std::optional<JobState> ParseJobState(absl::string_view name) {
  for (int i = 0; i < 6; ++i) {
    if (kNames[i] == name) return static_cast<JobState>(i);
  }
  return std::nullopt;
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

}  // namespace harmony::executor
