// The multi-server row: a world of 2 servers on loopback, each a
// runtime with its own virtual device on its own core, against one such
// server alone (weak scaling: each server trains the same minibatch, the
// world's is twice as large), the simulator's prediction for the world
// (harmony-plan --servers 2 on the loopback network measured here), and the
// bytes each server sent per iteration against a ring allreduce's bound.

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "common/units.h"
#include "executor/dist/collective.h"
#include "executor/dist/world_setup.h"
#include "executor/runtime/runtime.h"
#include "tests/bench/bench_util.h"
#include "tests/bench/sections.h"
#include "tests/bench/training_run.h"

namespace harmony::bench {
namespace {

constexpr int kServers = 2;

// Bytes this process has passed to write(2) and its kin, sockets included.
uint64_t WrittenBytes() {
  std::ifstream in("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "wchar:") return value;
  }
  return 0;
}

// The loopback network as Gloo sees it: bandwidth from allreduces of 64 MiB
// (2 (S - 1) / S of the bytes each way), latency from 4-byte ones.
absl::StatusOr<executor::CollectiveOptions> MeasureNetwork(double* bytes_per_s,
                                                           double* latency_s) {
  executor::CollectiveOptions co;
  co.store_port = executor::PickFreePort();
  co.world_size = kServers;
  co.timeout = absl::Seconds(60);
  std::vector<double> big(kServers), small(kServers);
  std::vector<absl::Status> status(kServers);
  std::vector<std::thread> threads;
  for (int r = 0; r < kServers; ++r) {
    threads.emplace_back([&, r] {
      executor::CollectiveOptions mine = co;
      mine.rank = r;
      auto c = executor::Collective::Join(mine);
      if (!c.ok()) {
        status[r] = c.status();
        return;
      }
      std::vector<at::Tensor> t = {at::ones({16 << 20}, at::kFloat)};
      std::vector<double> times;
      for (int i = 0; i < 4; ++i) {
        Stopwatch w;
        status[r].Update((*c)->AllReduceSum(t));
        if (i > 0) times.push_back(w.seconds());
      }
      big[r] = Summarize(times).median;
      std::vector<at::Tensor> one = {at::ones({1}, at::kFloat)};
      Stopwatch w;
      for (int i = 0; i < 200; ++i) status[r].Update((*c)->AllReduceSum(one));
      small[r] = w.seconds() / 200;
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  const double bytes = (64.0 * (1 << 20)) * 2 * (kServers - 1) / kServers;
  *bytes_per_s = bytes / big[0];
  *latency_s = small[0] / (2 * (kServers - 1));
  return co;
}

}  // namespace

absl::StatusOr<nlohmann::json> BenchWorld(const BenchOptions& o) {
  const ModelSpec spec = BenchModels(o.quick).front();
  const int minibatch = o.quick ? 16 : 32;
  Log(absl::StrFormat("world: %s, %d servers on loopback, one device and one core each",
                      spec.name, kServers));
  at::set_num_threads(1);
  absl::StatusOr<WrittenModel> model =
      WriteBenchModel(o.work_dir, spec, minibatch * kServers);
  if (!model.ok()) return model.status();
  absl::StatusOr<proto::ProfileFile> profile =
      ProfileOn(model->model_path, model->data, 1, minibatch, /*threads_per_device=*/1);
  if (!profile.ok()) return profile.status();
  double bandwidth = 0, latency = 0;
  absl::StatusOr<executor::CollectiveOptions> network = MeasureNetwork(&bandwidth, &latency);
  if (!network.ok()) return network.status();
  Log(absl::StrFormat("world: loopback allreduce %.2f GB/s, %.0f us per message", bandwidth / 1e9,
                      latency * 1e6));
  // Devices of twice the weights: training must swap (weights, gradients
  // and momentum alone are three times).
  const uint64_t memory = RoundUp(2 * WeightBytes(*profile), 1 << 20);
  planner::MakePlanOptions po;
  po.num_devices = 1;
  po.device_memory = memory;
  po.minibatch = minibatch;
  absl::StatusOr<planner::MadePlan> alone = planner::MakePlan(*profile, po);
  if (!alone.ok()) return alone.status();
  po.network.servers = kServers;
  po.network.bytes_per_s = bandwidth;
  po.network.latency_s = latency;
  po.backward_packs.clear();
  absl::StatusOr<planner::MadePlan> world_plan = planner::MakePlan(*profile, po);
  if (!world_plan.ok()) return world_plan.status();

  std::vector<std::string> names;  // Of the parameters.
  for (const auto& p : torch::jit::load(model->model_path).named_parameters()) {
    names.push_back(p.name);
  }
  // `n` servers at once, a runtime each in its own thread on one intra-op
  // thread; `world`: joined as one world (else each trains alone, to see
  // what sharing this machine's cores costs by itself).
  struct Servers {
    std::vector<std::vector<double>> seconds;
    std::vector<std::vector<at::Tensor>> weights;
    uint64_t written = 0;  // Bytes written during the timed iterations.
  };
  auto run = [&](int n, bool world) -> absl::StatusOr<Servers> {
    Servers out;
    out.seconds.resize(n);
    out.weights.resize(n);
    std::vector<absl::Status> status(n);
    executor::CollectiveOptions co = *network;
    co.store_port = executor::PickFreePort();
    co.world_size = n;
    uint64_t before = 0, after = 0;
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        status[r] = [&]() -> absl::Status {
          std::unique_ptr<executor::Collective> c;
          executor::RuntimeOptions ro;
          ro.devices.kind = common::DeviceSpec::Kind::kCpu;
          ro.devices.count = 1;
          ro.devices.capacity = memory;
          ro.optimizer = BenchOptimizerOptions();
          ro.seed = 1;
          ro.threads = 1;
          if (world) {
            executor::CollectiveOptions mine = co;
            mine.rank = r;
            HARMONY_ASSIGN_OR_RETURN(c, executor::Collective::Join(mine));
            ro.world = executor::MakeWorld(*c, /*shard_optimizer_state=*/false);
          }
          HARMONY_ASSIGN_OR_RETURN(
              std::unique_ptr<executor::Runtime> runtime,
              executor::Runtime::Create((world ? world_plan : alone)->plan, model->model_path, ro));
          HARMONY_RETURN_IF_ERROR(runtime->SetData(model->data));
          for (int i = 0; i < o.warmups + o.runs; ++i) {
            if (c != nullptr && i == o.warmups) {
              HARMONY_RETURN_IF_ERROR(c->Barrier());
              if (r == 0) before = WrittenBytes();
              HARMONY_RETURN_IF_ERROR(c->Barrier());
            }
            HARMONY_ASSIGN_OR_RETURN(executor::IterationMetrics m, runtime->RunIteration());
            if (c != nullptr) {
              HARMONY_ASSIGN_OR_RETURN(m.loss, c->AllReduceMean(m.loss));
            }
            if (i >= o.warmups) out.seconds[r].push_back(m.seconds);
          }
          if (c != nullptr) {
            HARMONY_RETURN_IF_ERROR(c->Barrier());
            if (r == 0) after = WrittenBytes();
          }
          for (const std::string& name : names) {
            HARMONY_ASSIGN_OR_RETURN(at::Tensor t, runtime->HostTensor(name));
            out.weights[r].push_back(t.clone());
          }
          return c != nullptr ? c->Barrier() : absl::OkStatus();
        }();
      });
    }
    for (std::thread& t : threads) t.join();
    for (const absl::Status& s : status) {
      if (!s.ok()) return s;
    }
    out.written = after - before;
    return out;
  };
  absl::StatusOr<Servers> one = run(1, false);
  if (!one.ok()) return one.status();
  absl::StatusOr<Servers> apart = run(kServers, false);
  if (!apart.ok()) return apart.status();
  absl::StatusOr<Servers> joined = run(kServers, true);
  if (!joined.ok()) return joined.status();
  const Stats world = Summarize(joined->seconds[0]);
  const Stats single = Summarize(one->seconds[0]);
  const Stats side_by_side = Summarize(apart->seconds[0]);
  const double predicted = world_plan->result.sim.iteration_s;
  const uint64_t gradients = GradientBytes(*profile);
  const double bound = 2.0 * (kServers - 1) / kServers * static_cast<double>(gradients);
  const double sent = static_cast<double>(joined->written) / kServers / o.runs;
  const auto& w = joined->weights;
  bool identical = w[0].size() == w[1].size() && !w[0].empty();
  for (size_t i = 0; identical && i < w[0].size(); ++i) identical = at::equal(w[0][i], w[1][i]);
  nlohmann::json out;
  out["model"] = spec.name;
  out["zoo"] = ZooJson(spec.zoo);
  out["servers"] = kServers;
  out["minibatch_per_server"] = minibatch;
  out["device_memory_bytes"] = memory;
  out["weight_bytes"] = WeightBytes(*profile);
  out["gradient_bytes"] = gradients;
  out["mode"] = PlanModeName(world_plan->plan);
  out["microbatch"] = world_plan->plan.config().backward_microbatch();
  out["network_bytes_per_s"] = bandwidth;
  out["network_latency_s"] = latency;
  out["one_server_iteration_s"] = ToJson(single);
  out["side_by_side_iteration_s"] = ToJson(side_by_side);
  out["world_iteration_s"] = ToJson(world);
  out["world_over_one"] = world.median / single.median;
  out["world_over_side_by_side"] = world.median / side_by_side.median;
  out["one_server_simulated_s"] = alone->result.sim.iteration_s;
  out["world_simulated_s"] = predicted;
  out["world_sim_error"] = predicted / world.median - 1;
  out["one_server_sim_error"] = alone->result.sim.iteration_s / single.median - 1;
  out["sent_bytes_per_server_per_iteration"] = sent;
  out["ring_allreduce_bound_bytes"] = bound;
  out["sent_over_bound"] = sent / bound;
  out["ranks_identical"] = identical;
  out["checks"] = nlohmann::json::array();
  out["checks"].push_back({{"name", "world: the ranks' weights are identical"},
                           {"ok", identical},
                           {"detail", identical ? "bit for bit" : "they differ"}});
  Log(absl::StrFormat(
      "world: one server %.3f s (simulated %.3f s), %d side by side unjoined %.3f s, world of %d "
      "%.3f s (%.2fx one, %.2fx side by side; simulated %.3f s, %+.0f%%); sent %s per server per "
      "iteration, %.2fx the ring bound %s",
      single.median, alone->result.sim.iteration_s, kServers, side_by_side.median, kServers,
      world.median, world.median / single.median, world.median / side_by_side.median, predicted,
      100 * (predicted / world.median - 1), common::FormatBytes(static_cast<uint64_t>(sent)),
      sent / bound, common::FormatBytes(static_cast<uint64_t>(bound))));
  return out;
}

}  // namespace harmony::bench
