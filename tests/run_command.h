// Runs a command line for end-to-end tests of the tools.
//
// Thread-safety: stateless.

#ifndef HARMONY_TESTS_RUN_COMMAND_H_
#define HARMONY_TESTS_RUN_COMMAND_H_

#include <string>

namespace harmony::testing {

struct Result {
  int exit_code = -1;  // -1 when it did not exit normally.
  std::string output;  // stdout and stderr together.
};

// Runs `command` with /bin/sh from the current directory (a test's runfiles,
// where Bazel places the tools) and collects its output.
Result RunCommand(const std::string& command);

// A loopback TCP port free now (bound, read, closed).
int FreePort();

}  // namespace harmony::testing

#endif  // HARMONY_TESTS_RUN_COMMAND_H_
