// harmony-plan: the offline planner.
//
//   harmony-plan MODEL.pt --gpus N --device-memory SIZE --minibatch D ...
//   harmony-plan profile MODEL.pt --sample-input x.pt [--devices cpu:2x512MiB]
//   harmony-plan simulate | inspect plan.pb
//   harmony-plan decompose MODEL.pt [--granularity N]
//   harmony-plan synthesize --profile p.json --block K --blocks N ...
//
// Picks the command by the first argument (planner/cli.h); each parses its
// flags into options, calls the library, and maps a Status to an exit code
// and one line on stderr.

#include <iostream>
#include <string>
#include <vector>

#include "planner/cli.h"

namespace {

constexpr char kUsage[] =
    "Usage: harmony-plan MODEL.pt --gpus N --device-memory SIZE --minibatch D\n"
    "                    --sample-input x.pt -o plan.pb [flags]   (see --help)\n"
    "       harmony-plan COMMAND ...\n\n"
    "Commands:\n"
    "  inspect plan.pb                        print a plan\n"
    "  simulate plan.pb [--trace t.json]      re-simulate a saved plan\n"
    "  profile MODEL.pt --sample-input x.pt   measure every vLayer on the devices\n"
    "  decompose MODEL.pt                     show how the model splits into vLayers\n"
    "  synthesize --profile p.json ...        scale a profile to a larger model\n\n"
    "Run harmony-plan COMMAND --help for a command's flags.\n";

}  // namespace

int main(int argc, char** argv) {
  namespace cli = harmony::planner::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "profile") return cli::ProfileCommand(args);
  if (command == "inspect") return cli::InspectCommand(args);
  if (command == "simulate") return cli::SimulateCommand(args);
  if (command == "decompose") return cli::DecomposeCommand(args);
  if (command == "synthesize") return cli::SynthesizeCommand(args);
  if (command.rfind("-", 0) == 0 || command.size() > 3 &&
                                        command.substr(command.size() - 3) == ".pt") {
    args.insert(args.begin(), command);
    return cli::PlanCommand(args);
  }
  std::cerr << "harmony-plan: \"" << command
            << "\" is not a command or a model file (MODEL.pt). Commands: inspect, simulate, "
               "profile, decompose, synthesize (see --help)\n";
  return 2;
}
