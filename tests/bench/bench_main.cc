// harmony-bench: Harmony against the baselines, the simulator against the
// runtime, and the limits. Run it with scripts/bench.sh.
//
//   harmony-bench [--quick] [--runs 3] [--out-dir docs/bench]
//                 [--sections link,schedules,denormals,clipping,precision,overhead,optimizer,planner,external,world]
//                 [--flush-denormal on|off]
//   harmony-bench --report-only [--out-dir docs/bench]
//
// Writes results.json, REPORT.md and SVG charts into --out-dir. Exits 1 when
// a run errors or an embedded correctness check fails, never on a time.

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <boost/program_options.hpp>
#include <ATen/Parallel.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/denormals.h"
#include "common/files.h"
#include "tests/bench/bench_util.h"
#include "tests/bench/report.h"
#include "tests/bench/sections.h"

namespace po = boost::program_options;
using nlohmann::json;

namespace {

constexpr char kAllSections[] =
    "link,schedules,denormals,clipping,precision,overhead,optimizer,planner,external,world";

// Adds a section's checks to the run's list.
void TakeChecks(json& section, json& checks) {
  if (!section.contains("checks")) return;
  for (json& c : section["checks"]) checks.push_back(c);
  section.erase("checks");
}

}  // namespace

int main(int argc, char** argv) {
  harmony::bench::BenchOptions options;
  std::string out_dir = "docs/bench", sections_text = kAllSections, testdata = "tests/testdata",
              flush_denormal = "on", models_text;
  double flop_per_byte = 880;
  po::options_description flags(
      "Usage: harmony-bench [--quick] [--out-dir DIR] [flags]\n\n"
      "Measures Harmony against on-demand swapping, GPipe and data parallel with\n"
      "swapping on the same runtime, the simulator against measured times, the\n"
      "overhead when a model fits, the CPU optimizer, the planner's search time\n"
      "and external models; writes DIR/results.json, DIR/REPORT.md and charts.\n\nFlags");
  // clang-format off
  flags.add_options()
      ("help,h", "show this help")
      ("quick", po::bool_switch(&options.quick), "smaller inputs, planner up to 200 vLayers")
      ("runs", po::value(&options.runs)->default_value(3),
       "timed runs per measurement (at least 3)")
      ("warmups", po::value(&options.warmups)->default_value(0),
       "untimed training iterations before the timed ones (0: 1 with --quick, "
       "else 3)")
      ("out-dir", po::value(&out_dir)->default_value(out_dir), "where the report goes")
      ("work-dir", po::value(&options.work_dir),
       "scratch files (default: a new directory under $TMPDIR or /tmp)")
      ("sections", po::value(&sections_text)->default_value(sections_text),
       "which to run (comma-separated)")
      ("testdata", po::value(&testdata)->default_value(testdata),
       "directory of the external models (tests/testdata)")
      ("flop-per-byte", po::value(&flop_per_byte)->default_value(flop_per_byte),
       "compute rate over link bandwidth of the server to emulate (GTX 1080 Ti on PCIe 3.0: ~880)")
      ("flush-denormal", po::value(&flush_denormal)->default_value(flush_denormal),
       "on | off: denormal floats flushed to zero in every section but \"denormals\" (which "
       "runs both ways)")
      ("models", po::value(&models_text),
       "the models the schedules and precision sections train, comma-separated (default: "
       "all; gpt,vgg, or gpt,resnet with --quick)")
      ("report-only", "redraw REPORT.md and the charts from OUT_DIR/results.json");
  // clang-format on
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, flags), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "harmony-bench: " << e.what() << " (see --help)\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << flags << "\n";
    return 0;
  }
  const std::string results_path = out_dir + "/results.json";
  if (vm.count("report-only")) {
    auto text = harmony::common::ReadFileToString(results_path);
    if (!text.ok()) {
      std::cerr << "harmony-bench: " << text.status().message() << "\n";
      return 1;
    }
    json results = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (results.is_discarded()) {
      std::cerr << "harmony-bench: " << results_path << " is not JSON\n";
      return 1;
    }
    absl::Status written = harmony::bench::WriteReport(results, out_dir);
    if (!written.ok()) {
      std::cerr << "harmony-bench: " << written.message() << "\n";
      return 1;
    }
    std::cout << "wrote " << out_dir << "/REPORT.md\n";
    return 0;
  }
  if (options.runs < 3) {
    std::cerr << "harmony-bench: --runs " << options.runs << ": at least 3 timed runs\n";
    return 2;
  }
  if (options.warmups < 0) {
    std::cerr << "harmony-bench: --warmups " << options.warmups << ": 0 or more\n";
    return 2;
  }
  if (options.warmups == 0) options.warmups = options.quick ? 1 : 3;
  {
    absl::StatusOr<bool> flush = harmony::common::ParseFlushDenormal(flush_denormal);
    if (!flush.ok()) {
      std::cerr << "harmony-bench: --flush-denormal: " << flush.status().message() << "\n";
      return 2;
    }
    options.flush_denormal = *flush;
  }
  const std::vector<std::string> sections = absl::StrSplit(sections_text, ',');
  for (const std::string& s : sections) {
    if (std::string(kAllSections).find(s) == std::string::npos || s.empty()) {
      std::cerr << "harmony-bench: unknown section \"" << s << "\" (sections: " << kAllSections
                << ")\n";
      return 2;
    }
  }
  if (!models_text.empty()) {
    options.models = absl::StrSplit(models_text, ',');
    const std::vector<std::string> known = harmony::bench::BenchModelNames(options.quick);
    for (const std::string& m : options.models) {
      if (std::find(known.begin(), known.end(), m) == known.end()) {
        std::cerr << "harmony-bench: --models: unknown model \"" << m << "\" (models"
                  << (options.quick ? " with --quick" : "") << ": " << absl::StrJoin(known, ",")
                  << ")\n";
        return 2;
      }
    }
  }
  if (options.work_dir.empty()) {
    const char* tmp = getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/harmony-bench-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      std::cerr << "harmony-bench: cannot create a scratch directory " << pattern << "\n";
      return 1;
    }
    options.work_dir = pattern;
  }
  for (const std::string& dir : {out_dir, options.work_dir}) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) {
      std::cerr << "harmony-bench: cannot create " << dir << ": " << error.message() << "\n";
      return 1;
    }
  }
  // LibTorch starts with one intra-op thread here; train with every core.
  at::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
  // This thread and its intra-op team; the runtime takes the plans'.
  harmony::common::ApplyFlushDenormal(options.flush_denormal);

  harmony::bench::Stopwatch total;
  json results;
  results["machine"] = harmony::bench::MachineInfo();
  results["flush_denormal"] = options.flush_denormal;
  std::cout << "harmony-bench on " << results["machine"]["cpu_model"].get<std::string>()
            << ", denormals " << (options.flush_denormal ? "flushed to zero" : "computed")
            << "\n";
  results["threads"] = at::get_num_threads();
  results["quick"] = options.quick;
  results["runs"] = options.runs;
  results["warmups"] = options.warmups;
  results["checks"] = json::array();
  results["errors"] = json::array();
  auto wanted = [&](const std::string& s) {
    return std::find(sections.begin(), sections.end(), s) != sections.end();
  };
  auto record = [&](const std::string& name, absl::StatusOr<json> section) {
    if (!section.ok()) {
      std::string error = absl::StrCat(name, ": ", section.status().ToString());
      harmony::bench::Log(absl::StrCat("error: ", error));
      results["errors"].push_back(error);
      return;
    }
    TakeChecks(*section, results["checks"]);
    results[name] = *std::move(section);
  };
  double emulated_link = 0;
  if (wanted("link") || wanted("schedules") || wanted("denormals") || wanted("clipping") ||
      wanted("precision")) {
    record("link_balance", harmony::bench::MeasureLinkBalance(options, flop_per_byte));
    if (results.contains("link_balance")) {
      emulated_link = results["link_balance"]["emulated_link_bytes_per_s"].get<double>();
    }
  }
  if (wanted("schedules") && emulated_link > 0) {
    record("schedules", harmony::bench::BenchSchedules(options, emulated_link));
  }
  if (wanted("denormals") && emulated_link > 0) {
    record("denormals", harmony::bench::BenchDenormals(options, emulated_link));
  }
  if (wanted("clipping") && emulated_link > 0) {
    record("clipping", harmony::bench::BenchClipping(options, emulated_link));
  }
  if (wanted("precision") && emulated_link > 0) {
    record("precision", harmony::bench::BenchPrecision(options, emulated_link));
  }
  if (wanted("overhead")) record("overhead", harmony::bench::BenchOverhead(options));
  if (wanted("optimizer")) record("optimizer", harmony::bench::BenchOptimizer(options));
  if (wanted("planner")) record("planner", harmony::bench::BenchPlanner(options));
  if (wanted("external")) record("external", harmony::bench::BenchExternal(options, testdata));
  if (wanted("world")) record("world", harmony::bench::BenchWorld(options));
  results["duration_s"] = total.seconds();

  absl::Status written = harmony::common::WriteFileAtomically(results_path, results.dump(1));
  if (written.ok()) written = harmony::bench::WriteReport(results, out_dir);
  if (!written.ok()) {
    std::cerr << "harmony-bench: " << written.message() << "\n";
    return 1;
  }
  int passed = 0, failed = 0;
  for (const json& c : results["checks"]) {
    if (c["ok"].get<bool>()) {
      ++passed;
    } else {
      ++failed;
      std::cerr << "harmony-bench: check failed: " << c["name"].get<std::string>() << ": "
                << c["detail"].get<std::string>() << "\n";
    }
  }
  std::cout << "\n" << harmony::bench::Headline(results) << "\nwrote " << out_dir
            << "/REPORT.md, results.json and charts in " << total.seconds() / 60
            << " minutes; correctness checks: " << passed << " passed, " << failed
            << " failed; errors: " << results["errors"].size() << "\n";
  return failed == 0 && results["errors"].empty() ? 0 : 1;
}
