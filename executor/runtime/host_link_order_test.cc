// The order of a device's copies over the host link against its compute:
// host inputs copied in at most Config::inputs_ahead microbatches ahead,
// and a task's sends to the host bounded (Config::host_outputs_pending),
// checked in the runtime's trace; training stays bit for bit the same.

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "executor/runtime/runtime.h"
#include "executor/runtime/runtime_testing.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace harmony::executor {
namespace {

using runtime_testing::Config;
using runtime_testing::ExpectLikeReference;
using runtime_testing::ExpectSameLosses;
using runtime_testing::GetModel;
using runtime_testing::MakeConfig;
using runtime_testing::MakePlan;
using runtime_testing::Mode;
using runtime_testing::Model;
using runtime_testing::Optimizer;
using runtime_testing::Options;
using runtime_testing::Reference;
using runtime_testing::RunPlan;
using runtime_testing::TrainingRun;

// Each name's spans in a run's trace, in time order (one per iteration),
// keyed "<device> <name>": in vDP every device computes the same vLayers
// under the same names, and one device's spans must not stand for
// another's (the mixed lists made NextBackwardsStashes... fail 1 run in 8).
std::map<std::string, std::vector<std::pair<double, double>>> Spans(const Runtime& runtime) {
  const nlohmann::json trace = nlohmann::json::parse(runtime.ChromeTrace());
  std::map<std::string, std::vector<std::pair<double, double>>> spans;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    const double ts = e["ts"].get<double>();
    const int device = e["pid"].get<int>() - 1;  // trace.cc: a process per device.
    spans[absl::StrCat(device, " ", e["name"].get<std::string>())].push_back(
        {ts, ts + e["dur"].get<double>()});
  }
  for (auto& [name, s] : spans) std::sort(s.begin(), s.end());
  return spans;
}

// How often, in a run's trace, a forward microbatch m of a task started
// computing before the task's sends of microbatch m - `bound` (activations,
// stashes) had reached the host: never, with plan::Config::
// host_outputs_pending = `bound`.
int SentLate(const proto::Plan& plan, const Runtime& runtime, int bound) {
  auto spans = Spans(runtime);
  int late = 0, checked = 0;
  for (const proto::DeviceSchedule& device : plan.devices()) {
    for (const proto::Task& t : device.tasks()) {
      if (t.kind() != proto::FORWARD) continue;
      for (int m = bound; m < t.microbatches_size(); ++m) {
        const auto& computes = spans[absl::StrCat(device.device(), " forward ",
                                                  t.vlayers().begin(), "-",
                                                  t.vlayers().end() - 1, " #", m)];
        for (const char* what : {"stash out ", "activations out "}) {
          const auto& sends =
              spans[absl::StrCat(device.device(), " ", what, t.id(), " #", m - bound)];
          for (size_t i = 0; i < std::min(computes.size(), sends.size()); ++i) {
            ++checked;
            late += sends[i].second > computes[i].first + 1 ? 1 : 0;  // 1 us of rounding.
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
  return late;
}

// How often, in a run's trace, a backward task's stash for microbatch m
// began copying in before its microbatch m - `ahead` - 1 had computed:
// never, with plan::Config::inputs_ahead = `ahead`.
int CopiedEarly(const proto::Plan& plan, const Runtime& runtime, int ahead) {
  auto spans = Spans(runtime);
  int early = 0, checked = 0;
  for (const proto::DeviceSchedule& device : plan.devices()) {
    for (const proto::Task& t : device.tasks()) {
      if (t.kind() != proto::BACKWARD) continue;
      for (int m = ahead + 1; m < t.microbatches_size(); ++m) {
        const auto& computes = spans[absl::StrCat(device.device(), " backward ",
                                                  t.vlayers().begin(), "-",
                                                  t.vlayers().end() - 1, " #", m - ahead - 1)];
        const auto& copies = spans[absl::StrCat(device.device(), " stash in ", t.id(), " #", m)];
        for (size_t i = 0; i < std::min(computes.size(), copies.size()); ++i) {
          ++checked;
          early += copies[i].first + 1 < computes[i].second ? 1 : 0;  // 1 us of rounding.
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
  return early;
}

// Over consecutive backward tasks of a device where the first reduces its
// gradients (vDP): how often the next task's first stash began copying in
// before the task's last microbatch had computed (`early`), and how often
// before its microbatch n - `ahead` - 1 (from its first on) had: never
// (`too_early`), as TaskInputs::Follow and the simulator have it.
struct AcrossTasks {
  int checked = 0, early = 0, too_early = 0;
};
AcrossTasks CopiedAcrossTasks(const proto::Plan& plan, const Runtime& runtime, int ahead) {
  auto spans = Spans(runtime);
  auto compute = [&](uint32_t d, const proto::Task& t,
                     int m) -> const std::vector<std::pair<double, double>>& {
    return spans[absl::StrCat(d, " backward ", t.vlayers().begin(), "-", t.vlayers().end() - 1,
                              " #", m)];
  };
  AcrossTasks a;
  for (const proto::DeviceSchedule& device : plan.devices()) {
    for (int i = 0; i + 1 < device.tasks_size(); ++i) {
      const proto::Task& t = device.tasks(i);
      const proto::Task& next = device.tasks(i + 1);
      const bool reduces = std::any_of(t.transfers().begin(), t.transfers().end(),
                                       [](const proto::Transfer& x) {
                                         return x.kind() == proto::GRADIENT_REDUCE;
                                       });
      if (t.kind() != proto::BACKWARD || next.kind() != proto::BACKWARD || !reduces) continue;
      const int n = t.microbatches_size();
      const auto& last = compute(device.device(), t, n - 1);
      const auto& bound = compute(device.device(), t, std::max(n - ahead - 1, 0));
      const auto& copies = spans[absl::StrCat(device.device(), " stash in ", next.id(), " #0")];
      for (size_t k = 0; k < std::min({last.size(), bound.size(), copies.size()}); ++k) {
        ++a.checked;
        a.early += copies[k].first + 1 < last[k].second ? 1 : 0;  // 1 us of rounding.
        a.too_early += copies[k].first + 1 < bound[k].second ? 1 : 0;
      }
    }
  }
  return a;
}

// vDP: a backward's first stashes copy in during the previous backward's
// last microbatches (as many ahead across the tasks as within one), never
// before the microbatch that far behind has computed, within the planned
// peaks; training stays the plain loop's (vDP's sums in their order) and,
// bit for bit, the same at 1 and at 4 ahead.
TEST(HostLinkOrderTest, NextBackwardsStashesCopyInDuringTheLastMicrobatches) {
  const Model& m = GetModel("gpt");
  Config c = MakeConfig(m, Mode::kVdp, 2, 1, 1, 1, 1);
  // Sends to the host bounded, so that the peaks are the plan's however
  // late the copy threads run: unbounded, the runtime held a backward's
  // sends two microbatches late on 2 loaded cores, 448 B over the planned
  // peak in about 1 run in 8 (the simulator times the link, not the host's
  // threads).
  c.host_outputs_pending = 1;
  const proto::Plan four = MakePlan(m, c);
  c.inputs_ahead = 1;
  const proto::Plan one = MakePlan(m, c);
  RuntimeOptions o = Options(2, 1ull << 30, Optimizer("sgd"));
  o.trace = true;
  TrainingRun a = RunPlan(m, four, o);
  TrainingRun b = RunPlan(m, one, o);
  ExpectLikeReference(m, one, b, Reference("sgd"), 1e-6, false);
  ExpectSameLosses(b.losses, a.losses, 0);
  struct Ran {
    const proto::Plan& plan;
    const TrainingRun& run;
    int ahead;
  };
  for (const Ran& r : {Ran{four, a, 4}, Ran{one, b, 1}}) {
    const proto::Plan& plan = r.plan;
    const TrainingRun& run = r.run;
    const int ahead = r.ahead;
    SCOPED_TRACE(absl::StrCat(ahead, " ahead"));
    const AcrossTasks across = CopiedAcrossTasks(plan, *run.runtime, ahead);
    EXPECT_GT(across.checked, 0);
    EXPECT_GT(across.early, 0);
    EXPECT_EQ(across.too_early, 0);
    ASSERT_FALSE(run.metrics.empty());
    for (size_t d = 0; d < run.metrics.back().device_peak_bytes.size(); ++d) {
      EXPECT_LE(run.metrics.back().device_peak_bytes[d],
                plan.estimates().device_peak_bytes(static_cast<int>(d)))
          << "device " << d << " at " << run.metrics.back().device_peak_activity[d];
    }
  }
}

// Host inputs copied in fewer microbatches ahead (plan::Config::
// inputs_ahead): the same training bit for bit, and no copy starts before
// the microbatch that far behind it has computed, where by default (4)
// some do.
TEST(HostLinkOrderTest, FewerInputsAheadTrainTheSameAndCopyLater) {
  const Model& m = GetModel("gpt");
  Config c = MakeConfig(m, Mode::kVpp, 1, 1, 1, 1, 1);  // 8 microbatches per task.
  const proto::Plan four = MakePlan(m, c);
  c.inputs_ahead = 1;
  const proto::Plan one = MakePlan(m, c);
  ASSERT_EQ(one.config().inputs_ahead(), 1u);
  EXPECT_LE(one.estimates().device_peak_bytes(0), four.estimates().device_peak_bytes(0));
  RuntimeOptions o = Options(1, 1ull << 30, Optimizer("sgd"));
  o.trace = true;
  TrainingRun a = RunPlan(m, four, o);
  TrainingRun b = RunPlan(m, one, o);
  ExpectLikeReference(m, one, b, Reference("sgd"), 0, true);
  ExpectSameLosses(b.losses, a.losses, 0);
  EXPECT_EQ(CopiedEarly(one, *b.runtime, 1), 0);
  EXPECT_GT(CopiedEarly(four, *a.runtime, 1), 0);
}

// What a task sends to the host held for at most N microbatches
// (plan::Config::host_outputs_pending): trains bit for bit like the plain
// loop and like the unbounded plan, and where the link is slower than the
// compute (emulated) a forward microbatch waits for the sends N before it,
// which unbounded it does not.
TEST(HostLinkOrderTest, BoundedHostSendsTrainTheSameAndWaitForTheLink) {
  for (const std::string family : {"gpt", "resnet"}) {
    SCOPED_TRACE(family);
    const Model& m = GetModel(family);
    // One device, packs of one vLayer, 8 microbatches of 1 per task.
    Config c = MakeConfig(m, Mode::kVpp, 1, 1, 1, 1, 1);
    const proto::Plan free = MakePlan(m, c);
    c.host_outputs_pending = 1;
    const proto::Plan bounded = MakePlan(m, c);
    ASSERT_EQ(bounded.config().host_outputs_pending(), 1u);
    RuntimeOptions o = Options(1, 1ull << 30, Optimizer("sgd"));
    TrainingRun fast = RunPlan(m, free, o);
    ASSERT_FALSE(fast.metrics.empty());
    // A link that needs at least 0.3 s for the iteration's traffic.
    const IterationMetrics& first = fast.metrics.front();
    o.emulate_host_link =
        static_cast<double>(first.bytes.to_device() + first.bytes.to_host()) / 0.6;
    o.trace = true;
    TrainingRun piled = RunPlan(m, free, o);
    TrainingRun held = RunPlan(m, bounded, o);
    ExpectLikeReference(m, bounded, held, Reference("sgd"), 0, true);
    ExpectSameLosses(held.losses, piled.losses, 0);
    EXPECT_EQ(SentLate(bounded, *held.runtime, 1), 0);
    EXPECT_GT(SentLate(free, *piled.runtime, 1), 0);
    // The link's use (IterationMetrics::to_device_busy_s, ...): every byte
    // of every kind crossed it, and while it was busy it ran at the
    // emulated rate, one copy after another.
    for (const IterationMetrics& it : held.metrics) {
      EXPECT_EQ(it.to_device_link_bytes, it.bytes.to_device());
      EXPECT_EQ(it.to_host_link_bytes, it.bytes.to_host());
      ASSERT_GT(it.to_device_busy_s, 0);
      ASSERT_GT(it.to_host_busy_s, 0);
      EXPECT_NEAR(it.to_device_link_bytes / it.to_device_busy_s / o.emulate_host_link, 1, 1e-6);
      EXPECT_NEAR(it.to_host_link_bytes / it.to_host_busy_s / o.emulate_host_link, 1, 1e-6);
    }
    // Not emulated: the copies' own spans, within the iteration.
    for (const IterationMetrics& it : fast.metrics) {
      EXPECT_EQ(it.to_device_link_bytes, it.bytes.to_device());
      ASSERT_GT(it.to_device_busy_s, 0);
      EXPECT_LT(it.to_device_busy_s, it.seconds);
    }
  }
}

}  // namespace
}  // namespace harmony::executor
