// The job manager with the real runtime on virtual CPU devices and a real
// state directory: admission checks with their codes, FIFO order, cancel of
// queued and running jobs (and the memory coming back), failing jobs that
// leave the others alone, and records that survive the manager.

#include "executor/jobs/job_manager.h"
#include "executor/jobs/job_store.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <torch/script.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/files.h"
#include "common/tensor_file.h"
#include "gtest/gtest.h"
#include "planner/plan/plan_builder.h"
#include "planner/profile/profiler.h"
#include "planner/search/cost_model.h"
#include "planner/search/task_graph.h"
#include "planner/sim/simulator.h"
#include "zoo/zoo.h"

namespace harmony::executor {
namespace {

constexpr uint64_t kDeviceBytes = 64ull << 20;

// A directory of this run's own: outputs of an earlier run (Bazel keeps
// the test's temporary directory) are not in the way of a daemon that
// refuses to overwrite them.
std::string Tmp(const std::string& name) {
  static const std::string* dir = [] {
    auto* d = new std::string(testing::TempDir() + "/run-" + std::to_string(getpid()));
    std::filesystem::create_directories(*d);
    return d;
  }();
  return *dir + "/" + name;
}

struct Model {
  std::string path;
  std::string data;
  proto::ProfileFile profile;
  std::shared_ptr<const planner::CostModel> cost;
};

const Model& Gpt() {
  static Model* m = [] {
    auto* m = new Model;
    m->path = Tmp("gpt.pt");
    m->data = Tmp("gpt_data.pt");
    zoo::ZooOptions o;
    o.family = "gpt";
    o.depth = 2;
    o.width = 16;
    o.heads = 2;
    o.seq_len = 8;
    o.vocab = 32;
    o.samples = 16;
    EXPECT_TRUE(zoo::WriteZooModelAndData(o, m->path, m->data).ok());
    planner::ProfilerOptions p;
    p.devices.count = 1;
    p.devices.capacity = 1ull << 30;
    p.max_microbatch = 8;
    p.repeats = 1;
    auto data = common::LoadTrainingData(m->data);
    EXPECT_TRUE(data.ok());
    m->profile = *planner::ProfileModel(m->path, *data, p);
    m->cost = *planner::CostModel::Create(m->profile);
    return m;
  }();
  return *m;
}

// A vPP plan for `devices` devices of `memory` bytes, minibatch 8.
std::shared_ptr<const proto::Plan> Plan(int devices, uint64_t memory = kDeviceBytes) {
  const Model& m = Gpt();
  planner::Config c;
  c.mode = planner::Mode::kVpp;
  c.num_devices = devices;
  c.device_memory = memory;
  c.minibatch = 8;
  c.forward_microbatch = 4;
  c.backward_microbatch = 4;
  const int layers = m.cost->num_layers();
  for (int at = 0; at < layers; ++at) c.backward_packs.push_back({at, at + 1});
  for (int at = 0; at < layers - 1; ++at) c.forward_packs.push_back({at, at + 1});
  auto g = planner::BuildTaskGraph(*m.cost, c);
  EXPECT_TRUE(g.ok()) << g.status();
  auto sim = planner::Simulate(*m.cost, *g, false);
  EXPECT_TRUE(sim.ok()) << sim.status();
  return std::make_shared<const proto::Plan>(
      planner::BuildPlan(m.profile, *g, *sim, std::nullopt));
}

JobSpec Spec(std::shared_ptr<const proto::Plan> plan, int64_t iterations) {
  JobSpec s;
  s.plan = std::move(plan);
  s.model_path = Gpt().path;
  s.data_path = Gpt().data;
  s.iterations = iterations;
  s.optimizer.learning_rate = 0.05;
  return s;
}

JobManagerOptions Options(const std::string& dir, int devices) {
  JobManagerOptions o;
  o.devices.count = devices;
  o.devices.capacity = kDeviceBytes;
  o.state_dir = Tmp(dir);
  o.host_memory = 1ull << 30;
  o.allowed_paths = {testing::TempDir()};
  return o;
}

std::vector<JobState> History(const JobRecord& r) {
  std::vector<JobState> out;
  for (const StateChange& c : r.history) out.push_back(c.state);
  return out;
}

// Waits (no sleeping) until the job has reported `iterations` iterations.
void WaitForProgress(JobManager& manager, const std::string& id, int64_t iterations) {
  absl::Notification reached;
  int owner = 0;
  ASSERT_TRUE(manager
                  .Watch(id, &owner,
                         [&](const JobEvent& e) {
                           if (e.kind == JobEvent::Kind::kProgress &&
                               e.progress.iteration >= iterations && !reached.HasBeenNotified()) {
                             reached.Notify();
                           }
                           return !reached.HasBeenNotified();
                         })
                  .ok());
  reached.WaitForNotification();
  manager.Unwatch(&owner);
}

TEST(JobManagerTest, TrainsAJobAndKeepsItsRecord) {
  auto manager = *JobManager::Create(Options("ok", 2));
  JobSpec spec = Spec(Plan(2), 3);
  spec.output_path = Tmp("ok_trained.pt");
  spec.name = "first";
  std::vector<JobEvent> events;
  auto submitted = manager->Submit(spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto done = manager->WaitForEnd(submitted->job_id);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state, JobState::kSucceeded) << done->reason;
  EXPECT_EQ(History(*done), (std::vector<JobState>{JobState::kQueued, JobState::kRunning,
                                                   JobState::kSucceeded}));
  ASSERT_TRUE(done->progress.has_value());
  EXPECT_EQ(done->progress->iteration, 3);
  EXPECT_GT(done->progress->swap_in_bytes, 0u);
  EXPECT_EQ(done->devices, (std::vector<int>{0, 1}));
  // Named as the daemon's devices are (cuda:0.0... on CUDA partitions).
  EXPECT_EQ(done->history[1].reason, "started on cpu:0,cpu:1");
  EXPECT_TRUE(std::filesystem::exists(spec.output_path));
  EXPECT_EQ(done->model_sha256, *common::Sha256OfFile(Gpt().path));

  // Watching a finished job gives its end at once.
  std::vector<JobState> seen;
  int owner = 0;
  ASSERT_TRUE(manager
                  ->Watch(submitted->job_id, &owner,
                          [&](const JobEvent& e) {
                            if (e.kind == JobEvent::Kind::kStateChange) {
                              seen.push_back(e.state_change.state);
                            }
                            return true;
                          })
                  .ok());
  EXPECT_EQ(seen, (std::vector<JobState>{JobState::kSucceeded}));

  auto logs = manager->Logs(submitted->job_id);
  ASSERT_TRUE(logs.ok());
  EXPECT_GE(logs->size(), 6u);  // 3 states, 3 iterations, the store.
  // An existing output is refused unless the job says to overwrite it.
  auto again = manager->Submit(spec);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
  spec.overwrite = true;
  // The same submission id returns the same job, without running it again.
  spec.submission_id = "abc";
  auto a = *manager->Submit(spec);
  auto b = *manager->Submit(spec);
  EXPECT_FALSE(a.already_submitted);
  EXPECT_TRUE(b.already_submitted);
  EXPECT_EQ(a.job_id, b.job_id);
  ASSERT_TRUE(manager->WaitForEnd(a.job_id).ok());
  EXPECT_EQ(manager->List({}).size(), 2u);
  EXPECT_EQ(manager->List({JobState::kFailed}).size(), 0u);
  EXPECT_EQ(manager->Get("job-99").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(manager->Cancel("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(JobManagerTest, AdmissionChecksEachHaveTheirError) {
  JobManagerOptions options = Options("admission", 2);
  options.max_queued = 1;
  auto manager = *JobManager::Create(options);
  auto code = [&](JobSpec spec) { return manager->Submit(std::move(spec)).status().code(); };

  EXPECT_EQ(code(Spec(Plan(2), 0)), absl::StatusCode::kInvalidArgument);
  JobSpec no_lr = Spec(Plan(2), 1);
  no_lr.optimizer.learning_rate = 0;
  EXPECT_EQ(code(no_lr), absl::StatusCode::kInvalidArgument);

  proto::Plan newer = *Plan(2);
  newer.set_schema_version(99);
  EXPECT_EQ(code(Spec(std::make_shared<const proto::Plan>(newer), 1)),
            absl::StatusCode::kFailedPrecondition);
  proto::Plan broken = *Plan(2);
  broken.mutable_devices(0)->mutable_tasks(0)->set_device(7);
  EXPECT_EQ(code(Spec(std::make_shared<const proto::Plan>(broken), 1)),
            absl::StatusCode::kInvalidArgument);

  auto three = manager->Submit(Spec(Plan(3), 1)).status();
  EXPECT_EQ(three.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(three.message(), "needs 3 devices; this daemon has 2"))
      << three.message();
  EXPECT_EQ(code(Spec(Plan(2, kDeviceBytes * 2), 1)), absl::StatusCode::kFailedPrecondition);

  JobSpec other_model = Spec(Plan(2), 1);
  ASSERT_TRUE(common::WriteFileAtomically(Tmp("other.pt"), "not the model").ok());
  other_model.model_path = Tmp("other.pt");
  auto sha = manager->Submit(other_model).status();
  EXPECT_EQ(sha.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(sha.message(), "is not the one the plan was made for"));
  JobSpec uploaded = Spec(Plan(2), 1);
  uploaded.model_path.clear();
  uploaded.model_bytes = "not the model either";
  EXPECT_EQ(code(uploaded), absl::StatusCode::kFailedPrecondition);

  JobSpec no_data = Spec(Plan(2), 1);
  no_data.data_path = Tmp("missing.pt");
  EXPECT_EQ(code(no_data), absl::StatusCode::kNotFound);
  JobSpec no_model = Spec(Plan(2), 1);
  no_model.model_path = Tmp("missing_model.pt");
  EXPECT_EQ(code(no_model), absl::StatusCode::kNotFound);
  JobSpec bad_out = Spec(Plan(2), 1);
  bad_out.output_path = Tmp("no/such/dir/out.pt");
  EXPECT_EQ(code(bad_out), absl::StatusCode::kInvalidArgument);
  // Paths outside the allowed roots, whether there or not.
  JobSpec outside = Spec(Plan(2), 1);
  outside.data_path = "/etc/passwd";
  auto denied = manager->Submit(outside).status();
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StrContains(denied.message(), "--data /etc/passwd is outside")) << denied;
  outside = Spec(Plan(2), 1);
  outside.output_path = "/nonexistent/out.pt";
  EXPECT_EQ(code(outside), absl::StatusCode::kPermissionDenied);

  JobManagerOptions small = Options("admission_host", 2);
  small.host_memory = 1024;
  auto host_manager = *JobManager::Create(small);
  auto host = host_manager->Submit(Spec(Plan(2), 1)).status();
  EXPECT_EQ(host.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(host.message(), "of host memory")) << host.message();

  // Queue full: one runs, one waits, the third is refused.
  auto running = *manager->Submit(Spec(Plan(2), 1000000));
  auto waiting = *manager->Submit(Spec(Plan(2), 1));
  auto full = manager->Submit(Spec(Plan(2), 1)).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(full.message(), "queue is full")) << full.message();
  EXPECT_TRUE(manager->Cancel(waiting.job_id).ok());
  EXPECT_TRUE(manager->Cancel(running.job_id).ok());
  EXPECT_EQ(manager->WaitForEnd(running.job_id)->state, JobState::kCancelled);
}

TEST(JobManagerTest, FifoCancelAndTheMemoryComesBack) {
  auto manager = *JobManager::Create(Options("fifo", 2));
  // A runs "forever" on both devices; B and C wait behind it in order.
  const std::string a = manager->Submit(Spec(Plan(2), 1000000))->job_id;
  const std::string b = manager->Submit(Spec(Plan(1), 2))->job_id;
  const std::string c = manager->Submit(Spec(Plan(2), 2))->job_id;
  WaitForProgress(*manager, a, 2);
  EXPECT_EQ(manager->Get(b)->state, JobState::kQueued);
  EXPECT_EQ(manager->Get(c)->state, JobState::kQueued);
  DevicesStatus busy = manager->Devices();
  ASSERT_EQ(busy.devices.size(), 2u);
  EXPECT_EQ(busy.devices[0].job_id, a);
  EXPECT_GT(busy.host_reserved_bytes, 0u);

  auto cancelling = manager->Cancel(a);
  ASSERT_TRUE(cancelling.ok());
  EXPECT_TRUE(cancelling->state == JobState::kCancelling ||
              cancelling->state == JobState::kCancelled);
  auto cancelled = *manager->WaitForEnd(a);
  EXPECT_EQ(cancelled.state, JobState::kCancelled) << cancelled.reason;
  EXPECT_EQ(History(cancelled), (std::vector<JobState>{JobState::kQueued, JobState::kRunning,
                                                        JobState::kCancelling,
                                                        JobState::kCancelled}));
  auto rb = *manager->WaitForEnd(b);
  auto rc = *manager->WaitForEnd(c);
  EXPECT_EQ(rb.state, JobState::kSucceeded) << rb.reason;
  EXPECT_EQ(rc.state, JobState::kSucceeded) << rc.reason;
  // B started after A ended; C (needing both devices) after B ended, on
  // both devices: all the memory came back.
  EXPECT_GE(rb.history[1].time, cancelled.history.back().time);
  EXPECT_GE(rc.history[1].time, rb.history.back().time);
  EXPECT_EQ(rc.devices, (std::vector<int>{0, 1}));
  DevicesStatus idle = manager->Devices();
  EXPECT_EQ(idle.host_reserved_bytes, 0u);
  for (const DeviceStatus& d : idle.devices) {
    EXPECT_EQ(d.job_id, "");
    EXPECT_EQ(d.used_bytes, 0u);
  }
}

TEST(JobManagerTest, SmallJobsRunSideBySide) {
  auto manager = *JobManager::Create(Options("side", 2));
  const std::string a = manager->Submit(Spec(Plan(1), 1000000))->job_id;
  const std::string b = manager->Submit(Spec(Plan(1), 1000000))->job_id;
  WaitForProgress(*manager, a, 1);
  WaitForProgress(*manager, b, 1);
  EXPECT_EQ(manager->Get(a)->devices, std::vector<int>{0});
  EXPECT_EQ(manager->Get(b)->devices, std::vector<int>{1});
  ASSERT_TRUE(manager->Cancel(a).ok());
  ASSERT_TRUE(manager->Cancel(b).ok());
  EXPECT_EQ(manager->WaitForEnd(a)->state, JobState::kCancelled);
  EXPECT_EQ(manager->WaitForEnd(b)->state, JobState::kCancelled);
}

// The server's devices as DescribeDevices gives them; CUDA in a build
// without it refused with the remedy (scripts/gpu-check.sh's build takes it).
TEST(JobManagerTest, DevicesAreDescribedAndCudaNeedsItsBuild) {
  auto manager = *JobManager::Create(Options("described", 3));
  const DevicesStatus d = manager->Devices();
  EXPECT_EQ(d.kind, "cpu");
  ASSERT_EQ(d.devices.size(), 3u);
  EXPECT_EQ(d.devices[2].name, "cpu:2");
  EXPECT_EQ(d.devices[2].memory_bytes, kDeviceBytes);
  JobManagerOptions cuda = Options("cuda", 4);
  cuda.devices.kind = common::DeviceSpec::Kind::kCuda;
  absl::StatusOr<std::unique_ptr<JobManager>> refused = JobManager::Create(cuda);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("needs a CUDA build"), std::string::npos)
      << refused.status();
  JobManagerOptions none = Options("none", 0);
  EXPECT_EQ(JobManager::Create(none).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JobManagerTest, AFailingJobLeavesTheOthersAlone) {
  auto manager = *JobManager::Create(Options("failing", 2));
  // Data whose samples have the wrong shape: the job fails at start.
  common::TrainingData wrong = *common::LoadTrainingData(Gpt().data);
  for (auto& t : wrong.inputs) t = t.narrow(1, 0, 4).contiguous();
  ASSERT_TRUE(common::SaveTrainingData(Tmp("wrong.pt"), wrong).ok());
  JobSpec bad = Spec(Plan(2), 2);
  bad.data_path = Tmp("wrong.pt");
  const std::string b = manager->Submit(bad)->job_id;
  // A learning rate that makes the loss overflow: the job fails with it.
  JobSpec diverging = Spec(Plan(2), 100);
  diverging.optimizer.learning_rate = 1e30;
  const std::string n = manager->Submit(diverging)->job_id;
  const std::string g = manager->Submit(Spec(Plan(2), 2))->job_id;
  auto rn = *manager->WaitForEnd(n);
  EXPECT_EQ(rn.state, JobState::kFailed);
  EXPECT_TRUE(absl::StrContains(rn.reason, "the loss is")) << rn.reason;
  auto rb = *manager->WaitForEnd(b);
  EXPECT_EQ(rb.state, JobState::kFailed);
  EXPECT_TRUE(absl::StrContains(rb.reason, "the plan expects")) << rb.reason;
  EXPECT_EQ(manager->WaitForEnd(g)->state, JobState::kSucceeded);

  // Devices too small for what the plan claims: out of memory, that job only.
  JobManagerOptions tiny = Options("failing_oom", 2);
  tiny.devices.capacity = 16 << 10;
  auto small = *JobManager::Create(tiny);
  const std::string o = small->Submit(Spec(Plan(2, 16 << 10), 2))->job_id;
  auto ro = *small->WaitForEnd(o);
  EXPECT_EQ(ro.state, JobState::kFailed);
  EXPECT_TRUE(absl::StrContains(ro.reason, "out of memory")) << ro.reason;
  EXPECT_EQ(small->Devices().host_reserved_bytes, 0u);
}

// The trained result is never lost to its output path. A path
// that stops being writable while the job trains (its directory removed):
// the job fails naming both paths, and the model is kept in the state
// directory, loadable, with the trained weights.
TEST(JobManagerTest, ATrainedModelThatCannotBeWrittenIsKept) {
  auto manager = *JobManager::Create(Options("kept", 2));
  const std::string dir = Tmp("kept_out");
  std::filesystem::create_directories(dir);
  JobSpec spec = Spec(Plan(2), 300);
  spec.output_path = dir + "/model.pt";
  const std::string id = manager->Submit(spec)->job_id;  // Admitted: the path is fine now.
  std::filesystem::remove_all(dir);
  const JobRecord r = *manager->WaitForEnd(id);
  EXPECT_EQ(r.state, JobState::kFailed);
  EXPECT_TRUE(absl::StrContains(r.reason, "writing the trained model to " + dir)) << r.reason;
  EXPECT_TRUE(absl::StrContains(r.reason, "the trained model is kept at ")) << r.reason;
  ASSERT_FALSE(r.kept_model_path.empty());
  torch::jit::Module kept = torch::jit::load(r.kept_model_path);
  torch::jit::Module original = torch::jit::load(Gpt().path);
  EXPECT_FALSE(at::equal((*kept.named_parameters().begin()).value,
                         (*original.named_parameters().begin()).value));
}

TEST(JobManagerTest, RecordsSurviveTheManager) {
  const JobManagerOptions options = Options("restart", 2);
  std::string done, running, queued;
  {
    auto manager = *JobManager::Create(options);
    done = manager->Submit(Spec(Plan(2), 1))->job_id;
    ASSERT_EQ(manager->WaitForEnd(done)->state, JobState::kSucceeded);
    running = manager->Submit(Spec(Plan(2), 1000000))->job_id;
    queued = manager->Submit(Spec(Plan(2), 2))->job_id;
    WaitForProgress(*manager, running, 1);
  }  // The daemon stops: the running job is stopped, the queued one kept.
  // A record left RUNNING by a crash (kill -9).
  JobRecord crashed = *JobRecordFromJson(
      *common::ReadFileToString(absl::StrCat(options.state_dir, "/jobs/", done, ".json")));
  crashed.id = "job-40";
  crashed.state = JobState::kRunning;
  ASSERT_TRUE(common::WriteFileAtomically(options.state_dir + "/jobs/job-40.json",
                                          JobRecordToJson(crashed))
                  .ok());
  ASSERT_TRUE(common::WriteFileAtomically(
                  options.state_dir + "/plans/job-40.pb",
                  *common::ReadFileToString(absl::StrCat(options.state_dir, "/plans/", done, ".pb")))
                  .ok());
  ASSERT_TRUE(common::WriteFileAtomically(options.state_dir + "/jobs/job-41.json", "{broken")
                  .ok());

  auto manager = *JobManager::Create(options);
  EXPECT_EQ(manager->Get(done)->state, JobState::kSucceeded);
  EXPECT_EQ(manager->Get(done)->progress->iteration, 1);
  auto stopped = *manager->Get(running);
  EXPECT_EQ(stopped.state, JobState::kFailed);
  EXPECT_EQ(stopped.reason, "daemon stopped");
  // Queued again, from the start (it had no checkpoint), and trained.
  EXPECT_EQ(manager->WaitForEnd("job-40")->state, JobState::kSucceeded);
  const JobRecord restarted = *manager->Get("job-40");
  bool requeued = false;
  for (const StateChange& c : restarted.history) {
    requeued = requeued || (c.state == JobState::kQueued &&
                            c.reason == "daemon restarted; starts again from the beginning "
                                        "(no checkpoint)");
  }
  EXPECT_TRUE(requeued) << JobRecordToJson(restarted);
  // The queued job runs after the restart; new ids continue after job-40.
  EXPECT_EQ(manager->WaitForEnd(queued)->state, JobState::kSucceeded);
  EXPECT_EQ(manager->Submit(Spec(Plan(2), 1))->job_id, "job-41");
}

}  // namespace
}  // namespace harmony::executor
