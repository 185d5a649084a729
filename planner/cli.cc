#include "planner/cli.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status.h"
#include "common/units.h"

namespace harmony::planner::cli {

namespace po = boost::program_options;

int Fail(const absl::Status& status) {
  std::cerr << "harmony-plan: " << status.message() << "\n";
  return 1;
}

int Parse(const Args& args, const po::options_description& flags,
          std::string* model, po::variables_map* vm) {
  po::options_description all;
  all.add(flags);
  if (model != nullptr) all.add_options()("model", po::value(model));
  po::positional_options_description positional;
  if (model != nullptr) positional.add("model", 1);
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(),
              *vm);
    po::notify(*vm);
  } catch (const po::error& e) {
    std::cerr << "harmony-plan: " << e.what() << " (see --help)\n";
    return 2;
  }
  if (vm->count("help")) {
    std::cout << flags << "\n";
    return -1;
  }
  return 0;
}

absl::StatusOr<double> ParseHostLink(const std::string& text) {
  if (text.empty()) return 0.0;
  absl::StatusOr<double> bandwidth = common::ParseBandwidth(text);
  if (!bandwidth.ok()) return common::Annotate(bandwidth.status(), "--host-link");
  return bandwidth;
}

absl::StatusOr<double> ParseHostLinkLatency(const std::string& text) {
  if (text.empty()) return -1.0;
  absl::StatusOr<absl::Duration> latency = common::ParseDuration(text);
  if (!latency.ok()) return common::Annotate(latency.status(), "--host-link-latency");
  return absl::ToDoubleSeconds(*latency);
}

absl::StatusOr<bool> ParsePrecisionBf16(const std::string& text) {
  if (text == "bf16") return true;
  if (text == "fp32") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("--precision \"", text, "\": expected fp32 or bf16"));
}

absl::StatusOr<bool> ParseGradPrecisionFp32(const std::string& text, bool bf16) {
  if (text.empty() || text == "bf16") return false;
  if (text != "fp32") {
    return absl::InvalidArgumentError(
        absl::StrCat("--grad-precision \"", text, "\": expected bf16 or fp32"));
  }
  if (!bf16) {
    return absl::InvalidArgumentError(
        "--grad-precision fp32 goes with --precision bf16 (fp32 plans' gradients are fp32)");
  }
  return true;
}

}  // namespace harmony::planner::cli
