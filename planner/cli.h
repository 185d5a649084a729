// harmony-plan's commands (harmony_plan_main.cc picks one by its first
// argument) and what they share: parsing a command's flags and mapping a
// Status to an exit code and one line on stderr. Each command takes the
// arguments after its name and returns the process's exit code.
//
// Thread-safety: for main's thread only (they print and may profile with
// every core).

#ifndef HARMONY_PLANNER_CLI_H_
#define HARMONY_PLANNER_CLI_H_

#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace harmony::planner::cli {

using Args = std::vector<std::string>;

// --split-blocks's help, the same on plan, profile and decompose.
inline constexpr char kSplitBlocksHelp[] =
    "cut each block once more along its own modules (a transformer block into its norms, "
    "attention and MLP)";

// Prints "harmony-plan: <message>"; returns 1.
int Fail(const absl::Status& status);

// Parses `args` with `flags` and, when `model` is not null, one positional
// argument into it (MODEL.pt, plan.pb). Returns 0 to go on, -1 after
// printing --help (exit 0), or 2 after a usage error.
int Parse(const Args& args, const boost::program_options::options_description& flags,
          std::string* model, boost::program_options::variables_map* vm);

// --host-link: a bandwidth, or 0 (the profile's own) when `text` is empty.
absl::StatusOr<double> ParseHostLink(const std::string& text);
// --host-link-latency in seconds; -1 (the profile's) when `text` is empty.
absl::StatusOr<double> ParseHostLinkLatency(const std::string& text);

// --precision: true for "bf16", false for "fp32"; InvalidArgument naming
// the flag otherwise.
absl::StatusOr<bool> ParsePrecisionBf16(const std::string& text);
// --grad-precision: true for "fp32" (with bf16 only), false for "bf16" or
// empty; InvalidArgument naming the flag otherwise.
absl::StatusOr<bool> ParseGradPrecisionFp32(const std::string& text, bool bf16);

// What a model is made of and how fast it runs (profile_commands.cc).
int ProfileCommand(const Args& args);
int DecomposeCommand(const Args& args);
int SynthesizeCommand(const Args& args);
// Search, simulate and write a plan (plan_command.cc).
int PlanCommand(const Args& args);
// A saved plan (plan_file_commands.cc).
int SimulateCommand(const Args& args);
int InspectCommand(const Args& args);

}  // namespace harmony::planner::cli

#endif  // HARMONY_PLANNER_CLI_H_
