// `harmony-exec run` (executor/exec_run.cc) and the flag helpers the
// daemon's command line shares with it.

#ifndef HARMONY_EXECUTOR_EXEC_RUN_H_
#define HARMONY_EXECUTOR_EXEC_RUN_H_

#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "absl/status/status.h"

namespace harmony::executor {

// Trains a plan: the arguments after "run". Returns the exit code.
int RunCommand(const std::vector<std::string>& args);

// Parses `args`; nullopt to go on, else the exit code (after --help, or a
// parse error).
std::optional<int> ParseFlags(const std::vector<std::string>& args,
                              const boost::program_options::options_description& shown,
                              const boost::program_options::options_description& all,
                              const boost::program_options::positional_options_description& positional,
                              boost::program_options::variables_map& vm);

// Prints "harmony-exec: <message>"; returns 1.
int Fail(const absl::Status& status);

}  // namespace harmony::executor

#endif  // HARMONY_EXECUTOR_EXEC_RUN_H_
