// The harmony-exec daemon end to end: real daemons started by the test on
// loopback, driven through the harmony-ctl binary (and the client library
// where a test needs the exact gRPC code or many concurrent calls).
//
// Covered: submit --wait and the trained model equal to `harmony-exec run`'s;
// cancel of a running job, after which a job gets all the memory; FIFO
// order; kill -9 and restart on the same state dir; each bad input with its
// code while the daemon keeps serving; a load test; the example configs in
// configs/. Tokens, outputs, paths and TLS: daemon_security_test.cc.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <torch/script.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/plan_file.h"
#include "executor/client/client.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon_fixture.h"

namespace harmony::daemon_testing {
namespace {

// trains as harmony-exec run does; a token file without its flags is
// refused at submission.
TEST_F(DaemonTest, ATokenFileJobTrainsAsARunDoes) {
  auto w = RunCommand(absl::StrCat(
      "/usr/bin/python3 -c \"import numpy as np\n"
      "np.random.seed(4); np.random.randint(0, 64, 16 * 40 + 1).astype(np.uint16).tofile('",
      Tmp("tokens.bin"), "')\""));
  ASSERT_EQ(w.exit_code, 0) << w.output;
  auto d = Daemon::Start(StartFlags("tokens", "cpu:2x1MiB"));
  ASSERT_FALSE(d->address().empty()) << d->output();
  const std::string data =
      absl::StrCat(" --data ", Tmp("tokens.bin"), " --token-dtype uint16 --seq-len 16");
  auto r = RunCommand(d->Ctl(absl::StrCat("submit ", Tmp("plan2.pb"), " --model ", Tmp("g.pt"),
                                          data, " --iterations 3 --seed 7 --wait --out ",
                                          Tmp("daemon_tokens.pt"))));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "SUCCEEDED")) << r.output;
  r = RunCommand(absl::StrCat(kExec, " run ", Tmp("plan2.pb"), " --model ", Tmp("g.pt"), data,
                              " --iterations 3 --seed 7 --shuffle --devices cpu:2x1MiB --out ",
                              Tmp("run_tokens.pt")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  torch::jit::Module a = torch::jit::load(Tmp("daemon_tokens.pt"));
  torch::jit::Module b = torch::jit::load(Tmp("run_tokens.pt"));
  auto pb = b.named_parameters().begin();
  for (const auto& p : a.named_parameters()) {
    EXPECT_TRUE(torch::equal(p.value, (*pb).value)) << p.name;
    ++pb;
  }
  r = RunCommand(d->Ctl("status job-1"));
  EXPECT_TRUE(absl::StrContains(r.output, "(windows of 16 + 1 tokens, uint16)")) << r.output;
  // A bf16 plan: the job takes its precision and equals the run, bit for
  // bit. An fp32 plan submitted as bf16 is refused, naming both.
  auto bf16 = RunCommand(d->Ctl(absl::StrCat("submit ", Tmp("plan2.pb"), " --model ", Tmp("g.pt"),
                                             data, " --iterations 2 --precision bf16")));
  EXPECT_NE(bf16.exit_code, 0) << bf16.output;
  EXPECT_TRUE(absl::StrContains(bf16.output, "the plan trains in fp32, not --precision bf16"))
      << bf16.output;
  bf16 = RunCommand(d->Ctl(absl::StrCat("submit ", Tmp("plan2_bf16.pb"), " --model ",
                                        Tmp("g.pt"), data, " --iterations 2 --wait --out ",
                                        Tmp("daemon_bf16.pt"))));
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  bf16 = RunCommand(absl::StrCat(kExec, " run ", Tmp("plan2_bf16.pb"), " --model ", Tmp("g.pt"),
                                 data, " --iterations 2 --devices cpu:2x1MiB --out ",
                                 Tmp("run_bf16.pt")));
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  {
    torch::jit::Module x = torch::jit::load(Tmp("daemon_bf16.pt"));
    torch::jit::Module y = torch::jit::load(Tmp("run_bf16.pt"));
    auto py = y.named_parameters().begin();
    for (const auto& p : x.named_parameters()) {
      EXPECT_TRUE(torch::equal(p.value, (*py).value)) << "bf16: " << p.name;
      ++py;
    }
  }
  EXPECT_TRUE(absl::StrContains(RunCommand(d->Ctl("status job-2")).output, ", bf16"));
  // Its TensorBoard event files, under the state dir, as TensorBoard reads them.
  const size_t at = r.output.find("  tensorboard: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const size_t from = at + 15;
  const std::string dir = r.output.substr(from, r.output.find(" (", from) - from);
  EXPECT_TRUE(absl::StrContains(dir, "/tensorboard/job-1")) << dir;
  auto check = RunCommand(absl::StrCat("/usr/bin/python3 tests/tensorboard_check.py ", dir,
                                       " proto/tensorboard.proto"));
  ASSERT_EQ(check.exit_code, 0) << check.output;
  const nlohmann::json events = nlohmann::json::parse(check.output);
  EXPECT_EQ(events["scalars"]["train/loss"].size(), 3u) << check.output;
  r = RunCommand(d->Ctl(absl::StrCat("submit ", Tmp("plan2.pb"), " --model ", Tmp("g.pt"),
                                     " --data ", Tmp("tokens.bin"), " --seq-len 16 "
                                     "--iterations 3")));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "give --token-dtype uint16 or uint32")) << r.output;
  d->Signal(SIGTERM);
  EXPECT_EQ(d->Wait(), 0) << d->output();
}

TEST_F(DaemonTest, SubmitWaitTrainsTheSameModelAsARun) {
  auto d = Daemon::Start(StartFlags("same", "cpu:2x1MiB"));
  ASSERT_FALSE(d->address().empty()) << d->output();
  // The denormal policy against the plan's (profiled flushing): per job;
  // and the recipe (a schedule, clipping that fires, no-decay groups,
  // validation).
  const std::string settings = absl::StrCat(
      "--iterations 4 --optimizer adamw --lr 0.01 --weight-decay 0.01 --flush-denormal off "
      "--lr-schedule cosine --warmup-iterations 1 --min-lr 0.001 --clip-grad-norm 0.01 "
      "--clip-mode hold --no-decay --eval-every 2 --eval-iterations 1 --eval-data ",
      Tmp("g_data.pt"));
  auto r = RunCommand(Submit(*d, "plan2", absl::StrCat(settings, " --wait --name same --out ",
                                                       Tmp("daemon_trained.pt"))));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "SUCCEEDED")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "iteration 4/4")) << r.output;

  r = RunCommand(absl::StrCat(kExec, " run ", Tmp("plan2.pb"), " --model ", Tmp("g.pt"),
                              " --data ", Tmp("g_data.pt"), " --devices cpu:2x1MiB ", settings,
                              " --out ", Tmp("run_trained.pt"), " --metrics ",
                              Tmp("run_metrics.jsonl")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  double run_eval_loss = -1;
  {
    absl::StatusOr<std::string> lines = common::ReadFileToString(Tmp("run_metrics.jsonl"));
    ASSERT_TRUE(lines.ok()) << lines.status();
    for (absl::string_view line : absl::StrSplit(*lines, '\n', absl::SkipEmpty())) {
      nlohmann::json m = nlohmann::json::parse(line);
      if (m.contains("eval")) run_eval_loss = m["eval"]["loss"].get<double>();
    }
  }
  torch::jit::Module a = torch::jit::load(Tmp("daemon_trained.pt"));
  torch::jit::Module b = torch::jit::load(Tmp("run_trained.pt"));
  torch::jit::Module original = torch::jit::load(Tmp("g.pt"));
  auto pa = a.named_parameters();
  auto pb = b.named_parameters().begin();
  auto po = original.named_parameters().begin();
  int compared = 0;
  for (const auto& p : pa) {
    EXPECT_EQ(p.name, (*pb).name);
    EXPECT_TRUE(torch::equal(p.value, (*pb).value)) << p.name;
    EXPECT_FALSE(torch::equal(p.value, (*po).value)) << p.name << " did not train";
    ++pb;
    ++po;
    ++compared;
  }
  EXPECT_GT(compared, 4);

  // What the job looks like afterwards.
  nlohmann::json job = Json(d->Ctl("status job-1 --json"));
  EXPECT_EQ(job["state"], "SUCCEEDED");
  EXPECT_EQ(job["progress"]["iteration"], 4);
  EXPECT_EQ(job["optimizer"]["kind"], "ADAMW");
  EXPECT_EQ(job["optimizer"]["lr_schedule"], "cosine");
  EXPECT_EQ(job["optimizer"]["decay_iterations"], "4");  // int64 in proto JSON.
  EXPECT_EQ(job["optimizer"]["clip_grad_norm"], 0.01);
  EXPECT_EQ(job["optimizer"]["clip_mode"], "hold");
  EXPECT_EQ(job["optimizer"]["no_decay"], "auto");
  EXPECT_EQ(job["optimizer"]["eval_every"], "2");
  EXPECT_EQ(job["progress"]["eval_iteration"], 4);
  EXPECT_EQ(job["progress"]["eval_loss"].get<double>(), run_eval_loss);
  EXPECT_EQ(job["flush_denormal"], false);
  EXPECT_EQ(job["history"].size(), 3u);
  r = RunCommand(d->Ctl("list"));
  EXPECT_TRUE(absl::StrContains(r.output, "job-1")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "same")) << r.output;
  r = RunCommand(d->Ctl("logs job-1"));
  EXPECT_TRUE(absl::StrContains(r.output, "iteration 4/4 loss")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "denormals computed")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "(clipped)")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "recipe: cosine lr 0.01, warm-up 1")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "evaluation after iteration 2: loss")) << r.output;
  r = RunCommand(d->Ctl("status job-1"));
  EXPECT_TRUE(absl::StrContains(r.output, "clip grad norm: 0.01 (hold)")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "eval loss")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "validation: ")) << r.output;
  // Evaluation data that is not there is refused at submission.
  r = RunCommand(Submit(*d, "plan2", "--iterations 4 --eval-data " + Tmp("nonexistent/val.pt")));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "evaluation data")) << r.output;
  // Bad values are refused at submission, naming the flag.
  r = RunCommand(Submit(*d, "plan2", "--iterations 4 --lr inf"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "--lr must be a finite number >= 0, got inf"))
      << r.output;
  r = RunCommand(Submit(*d, "plan2", "--iterations 4 --lr-schedule linear --min-lr 1"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "--min-lr 1 is above --lr 0.01")) << r.output;
  // Global flags before the command, as git and kubectl take them, and the
  // address from the environment.
  r = RunCommand(absl::StrCat(kCtl, " --address ", d->address(), " --token-file ",
                              d->token_file(), " --json list"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["jobs"].size(), 1u) << r.output;
  r = RunCommand(absl::StrCat("HARMONY_ADDRESS=", d->address(), " HARMONY_TOKEN_FILE=",
                              d->token_file(), " ", kCtl, " status job-1"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "SUCCEEDED")) << r.output;
  r = RunCommand(absl::StrCat(kCtl, " --adress ", d->address(), " list"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "unknown global flag \"--adress\"")) << r.output;
  // The daemon logged each job event.
  EXPECT_TRUE(absl::StrContains(d->output(), "job-1 SUCCEEDED")) << d->output();
  d->Signal(SIGTERM);
  EXPECT_EQ(d->Wait(), 0) << d->output();
}

TEST_F(DaemonTest, CancelFreesTheMemoryAndQueuedJobsRunInOrder) {
  auto d = Daemon::Start(StartFlags("cancel", "cpu:2x1MiB"));
  ASSERT_FALSE(d->address().empty()) << d->output();
  // A runs until cancelled; B and C wait behind it, in order.
  ASSERT_EQ(FirstLine(RunCommand(Submit(*d, "plan2", "--iterations 1000000")).output), "job-1");
  ASSERT_EQ(FirstLine(RunCommand(Submit(*d, "plan2", "--iterations 3")).output), "job-2");
  ASSERT_EQ(FirstLine(RunCommand(Submit(*d, "plan1", "--iterations 2")).output), "job-3");
  WaitUntilTraining(*d, "job-1");
  nlohmann::json devices = Json(d->Ctl("devices --json"));
  EXPECT_EQ(devices["devices"][0]["job_id"], "job-1");
  EXPECT_EQ(devices["devices"][1]["job_id"], "job-1");
  EXPECT_EQ(Json(d->Ctl("status job-2 --json"))["state"], "QUEUED");

  auto r = RunCommand(d->Ctl("cancel job-1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "CANCEL")) << r.output;
  r = RunCommand(d->Ctl("watch job-1"));
  EXPECT_EQ(r.exit_code, 1) << r.output;  // Watch of a job that did not succeed.
  EXPECT_TRUE(absl::StrContains(r.output, "CANCELLED")) << r.output;

  // B then C, each after the one before it ended; B (both devices) got all
  // the memory A had.
  r = RunCommand(d->Ctl("watch job-3"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json a = Json(d->Ctl("status job-1 --json"));
  nlohmann::json b = Json(d->Ctl("status job-2 --json"));
  nlohmann::json c = Json(d->Ctl("status job-3 --json"));
  EXPECT_EQ(a["state"], "CANCELLED");
  EXPECT_EQ(b["state"], "SUCCEEDED") << b.dump();
  EXPECT_EQ(c["state"], "SUCCEEDED") << c.dump();
  std::vector<std::string> states;
  for (const auto& h : a["history"]) states.push_back(h["state"]);
  EXPECT_EQ(states, (std::vector<std::string>{"QUEUED", "RUNNING", "CANCELLING", "CANCELLED"}));
  auto client = executor::ExecutorClient::Create(ClientFor(*d));
  auto when = [&](const std::string& id, int k) {  // Of the k-th state change; -1: last.
    proto::Job job = *client->GetJob(id);
    const auto& t = job.history(k < 0 ? job.history_size() - 1 : k).time();
    return t.seconds() * 1000000000 + t.nanos();
  };
  EXPECT_GE(when("job-2", 1), when("job-1", -1));
  EXPECT_GE(when("job-3", 1), when("job-2", -1));
  EXPECT_EQ(b["devices"].size(), 2u);
  devices = Json(d->Ctl("devices --json"));
  EXPECT_FALSE(devices.contains("host_reserved_bytes")) << devices.dump();  // 0: unset.
  for (const auto& dev : devices["devices"]) {
    EXPECT_FALSE(dev.contains("job_id")) << dev.dump();
    EXPECT_FALSE(dev.contains("used_bytes")) << dev.dump();
  }
}

// A daemon killed with -9 mid-job and started again keeps its
// records and resumes the job from its latest checkpoint; the job ends with
// the same weights, bit for bit, as a run straight through.
TEST_F(DaemonTest, Kill9MidJobResumesFromItsCheckpointWithTheSameWeights) {
  const std::string flags = StartFlags("restart", "cpu:2x1MiB");
  const std::string settings = "--optimizer adam --lr 0.01 --seed 5";
  const int iterations = 1000;
  {
    auto d = Daemon::Start(flags);
    ASSERT_FALSE(d->address().empty()) << d->output();
    ASSERT_EQ(RunCommand(Submit(*d, "plan2", "--iterations 2 --wait")).exit_code, 0);
    auto r = RunCommand(Submit(*d, "plan2", absl::StrCat(settings, " --iterations ", iterations,
                                                         " --checkpoint-interval 20 --out ",
                                                         Tmp("resumed.pt"))));
    ASSERT_EQ(FirstLine(r.output), "job-2") << r.output;
    WaitUntilTraining(*d, "job-2", 50);
    d->Signal(SIGKILL);
    EXPECT_EQ(d->Wait(), -SIGKILL);
  }
  auto d = Daemon::Start(flags);
  ASSERT_FALSE(d->address().empty()) << d->output();
  nlohmann::json list = Json(d->Ctl("list --json"));
  ASSERT_EQ(list["jobs"].size(), 2u) << list.dump();
  EXPECT_EQ(list["jobs"][0]["state"], "SUCCEEDED");
  EXPECT_EQ(list["jobs"][0]["progress"]["iteration"], 2);
  EXPECT_TRUE(absl::StrContains(d->output(), "job-2 QUEUED: daemon restarted; resumes from "
                                             "iteration "))
      << d->output();
  auto r = RunCommand(d->Ctl("watch job-2"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json job = Json(d->Ctl("status job-2 --json"));
  EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump();
  const int64_t resumed = std::stoll(job["resumed_from_iteration"].get<std::string>());
  EXPECT_GE(resumed, 20) << job.dump();  // Killed after iteration 50.
  EXPECT_LT(resumed, iterations) << job.dump();
  EXPECT_EQ(resumed % 20, 0) << job.dump();
  r = RunCommand(d->Ctl("status job-2"));
  EXPECT_TRUE(absl::StrContains(r.output, absl::StrCat("resumed from iteration ", resumed)))
      << r.output;
  // The same weights as straight through.
  r = RunCommand(absl::StrCat(kExec, " run ", Tmp("plan2.pb"), " --model ", Tmp("g.pt"),
                              " --data ", Tmp("g_data.pt"), " --devices cpu:2x1MiB ", settings,
                              " --shuffle --iterations ", iterations, " --out ",
                              Tmp("straight.pt")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  torch::jit::Module a = torch::jit::load(Tmp("resumed.pt"));
  torch::jit::Module b = torch::jit::load(Tmp("straight.pt"));
  auto pb = b.named_parameters().begin();
  int checked = 0;
  for (const auto& p : a.named_parameters()) {
    EXPECT_EQ(p.name, (*pb).name);
    EXPECT_TRUE(torch::equal(p.value, (*pb).value)) << p.name;
    ++pb;
    ++checked;
  }
  EXPECT_GT(checked, 4);
  // And it serves: a finished job goes on for more iterations from its
  // latest checkpoint, as a new job.
  r = RunCommand(Submit(*d, "plan2", absl::StrCat(settings, " --iterations ", iterations + 10,
                                                  " --resume job-2 --checkpoint-minutes 60 "
                                                  "--keep-checkpoints 1 --wait")));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(FirstLine(r.output), "job-3");
  job = Json(d->Ctl("status job-3 --json"));
  EXPECT_EQ(job["resumed_from_iteration"], std::to_string(iterations)) << job.dump();
  EXPECT_EQ(job["progress"]["iteration"], iterations + 10) << job.dump();
  EXPECT_EQ(job["checkpoint_iteration"], std::to_string(iterations + 10)) << job.dump();
}

TEST_F(DaemonTest, BadInputGetsItsErrorAndTheDaemonKeepsServing) {
  auto d = Daemon::Start(absl::StrCat(StartFlags("bad", "cpu:2x1MiB"),
                                      " --max-queued 1 --max-message-size 16KiB"));
  ASSERT_FALSE(d->address().empty()) << d->output();
  auto client = executor::ExecutorClient::Create(ClientFor(*d));
  proto::SubmitJobRequest good;
  good.set_plan(*common::ReadFileToString(Tmp("plan2.pb")));
  good.set_model_path(Tmp("g.pt"));
  good.set_data_path(Tmp("g_data.pt"));
  good.set_iterations(1);
  good.mutable_optimizer()->set_learning_rate(0.01);
  auto code = [&](const proto::SubmitJobRequest& r) { return client->Submit(r).status().code(); };

  proto::SubmitJobRequest r = good;
  r.set_plan("not a plan");
  EXPECT_EQ(code(r), absl::StatusCode::kInvalidArgument);
  r = good;
  r.set_iterations(0);
  EXPECT_EQ(code(r), absl::StatusCode::kInvalidArgument);
  r = good;
  r.set_model_path(Tmp("other.pt"));
  EXPECT_EQ(code(r), absl::StatusCode::kFailedPrecondition);
  r = good;
  r.set_plan(*common::ReadFileToString(Tmp("plan4.pb")));
  EXPECT_EQ(code(r), absl::StatusCode::kFailedPrecondition);
  r = good;
  r.set_plan(*common::ReadFileToString(Tmp("plan_big.pb")));
  EXPECT_EQ(code(r), absl::StatusCode::kFailedPrecondition);
  r = good;
  proto::Plan newer = *common::ParsePlan(good.plan(), "plan2");
  newer.set_schema_version(newer.schema_version() + 1);
  r.set_plan(common::SerializePlanFile(newer));
  EXPECT_EQ(code(r), absl::StatusCode::kFailedPrecondition);
  r = good;
  r.set_data_path(Tmp("no_data.pt"));
  EXPECT_EQ(code(r), absl::StatusCode::kNotFound);
  r = good;
  r.set_model_bytes(*common::ReadFileToString(Tmp("g.pt")));  // Over 16 KiB.
  EXPECT_EQ(code(r), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(client->GetJob("job-42").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client->Cancel("job-42").status().code(), absl::StatusCode::kNotFound);

  // The same through harmony-ctl: one line, a non-zero exit.
  auto out = RunCommand(d->Ctl(absl::StrCat("submit ", Tmp("plan2.pb"), " --model ",
                                            Tmp("other.pt"), " --data ", Tmp("g_data.pt"),
                                            " --iterations 1 --by-path")));
  EXPECT_EQ(out.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(out.output, "is not the one the plan was made for"))
      << out.output;
  // An output outside the allowed paths is refused before any training (a
  // directory that cannot be written: job_manager_test).
  out = RunCommand(Submit(*d, "plan2", "--by-path --iterations 1 --out /proc/x.pt"));
  EXPECT_EQ(out.exit_code, 1) << out.output;
  EXPECT_TRUE(absl::StrContains(out.output, "--out /proc/x.pt is outside the paths")) << out.output;
  out = RunCommand(Submit(*d, "plan2", absl::StrCat("--by-path --iterations 1 --out ", Tmp(""))));
  EXPECT_EQ(out.exit_code, 1) << out.output;
  EXPECT_TRUE(absl::StrContains(out.output, "is a directory")) << out.output;
  // Resuming from what is not a checkpoint of this model.
  out = RunCommand(Submit(*d, "plan2", absl::StrCat("--by-path --iterations 2 --resume ", Tmp("g.pt"))));
  EXPECT_EQ(out.exit_code, 1) << out.output;
  EXPECT_TRUE(absl::StrContains(out.output, "not a Harmony checkpoint")) << out.output;
  out = RunCommand(d->Ctl("status job-42"));
  EXPECT_EQ(out.exit_code, 4);
  EXPECT_EQ(out.output, "harmony-ctl: no job job-42\n");
  out = RunCommand(d->Ctl(absl::StrCat("submit ", Tmp("plan2.pb"), " --model ", Tmp("g.pt"),
                                       " --data ", Tmp("other_data.pt"),
                                       " --iterations 1 --wait --by-path")));
  EXPECT_EQ(out.exit_code, 1) << out.output;  // Another model's data: the job fails.
  EXPECT_TRUE(absl::StrContains(out.output, "FAILED")) << out.output;

  // Queue full: one running, one waiting, the next refused.
  ASSERT_EQ(RunCommand(Submit(*d, "plan2", "--by-path --iterations 1000000")).exit_code, 0);
  ASSERT_EQ(RunCommand(Submit(*d, "plan2", "--by-path --iterations 1")).exit_code, 0);
  EXPECT_EQ(code(good), absl::StatusCode::kResourceExhausted);
  auto jobs = *client->ListJobs();
  for (const auto& j : jobs) {
    if (j.state() == proto::QUEUED || j.state() == proto::RUNNING) {
      ASSERT_TRUE(client->Cancel(j.id()).ok());
    }
  }
  // Still serving: a good job succeeds.
  out = RunCommand(Submit(*d, "plan2", "--by-path --iterations 2 --wait"));
  EXPECT_EQ(out.exit_code, 0) << out.output;
  out = RunCommand(Submit(*d, "plan2", "--by-path --iterations 0"));
  EXPECT_EQ(out.exit_code, 2) << out.output;
  out = RunCommand(absl::StrCat(kCtl, " list --address 127.0.0.1:1"));
  EXPECT_EQ(out.exit_code, 3);
  EXPECT_TRUE(absl::StrContains(out.output, "daemon unreachable at 127.0.0.1:1")) << out.output;

  // A daemon with less host memory than the plan needs.
  auto small = Daemon::Start(absl::StrCat(StartFlags("bad_host", "cpu:2x1MiB"),
                                          " --host-memory 1KiB"));
  ASSERT_FALSE(small->address().empty()) << small->output();
  auto small_client = executor::ExecutorClient::Create(ClientFor(*small));
  auto host = small_client->Submit(good).status();
  EXPECT_EQ(host.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(host.message(), "of host memory")) << host.message();
  EXPECT_TRUE(absl::StrContains(host.message(), "this daemon has 1.00 KiB")) << host.message();
}

TEST_F(DaemonTest, StatusCallsUnderLoadWhileAJobRuns) {
  auto d = Daemon::Start(StartFlags("load", "cpu:2x1MiB"));
  ASSERT_FALSE(d->address().empty()) << d->output();
  ASSERT_EQ(FirstLine(RunCommand(Submit(*d, "plan2", "--iterations 1000000")).output), "job-1");
  WaitUntilTraining(*d, "job-1");
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&] {
      auto client = executor::ExecutorClient::Create(ClientFor(*d));
      for (int i = 0; i < 25; ++i) {
        auto job = client->GetJob("job-1");
        (job.ok() && job->state() == proto::RUNNING ? ok : failed)++;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 200);
  EXPECT_EQ(failed.load(), 0);
  auto client = executor::ExecutorClient::Create(ClientFor(*d));
  ASSERT_TRUE(client->Cancel("job-1").ok());
}

TEST_F(DaemonTest, TheExampleConfigsWork) {
  // The 4-device daemon, on a free port and a temporary state dir.
  auto d = Daemon::Start(absl::StrCat("--config configs/daemon-4dev.json --listen 127.0.0.1:0 "
                                      "--state-dir ",
                                      Tmp("configs"), " --allow-path ", ::testing::TempDir(),
                                      " --allow-path ."));
  ASSERT_FALSE(d->address().empty()) << d->output();
  nlohmann::json devices = Json(d->Ctl("devices --json"));
  ASSERT_EQ(devices["devices"].size(), 4u);
  EXPECT_EQ(devices["devices"][3]["memory_bytes"], std::to_string(2ull << 30));
  // The demo's job, with this test's files.
  auto r = RunCommand(d->Ctl(absl::StrCat("submit --config configs/demo-job.json ",
                                          Tmp("plan2.pb"), " --model ", Tmp("g.pt"), " --data ",
                                          Tmp("g_data.pt"), " --out ", Tmp("demo_job.pt"),
                                          " --wait")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json job = Json(d->Ctl("status job-1 --json"));
  EXPECT_EQ(job["name"], "demo-gpt");
  EXPECT_EQ(job["iterations"], 10);
  EXPECT_EQ(job["optimizer"]["kind"], "ADAMW");
  EXPECT_TRUE(absl::EndsWith(job["checkpoint_path"].get<std::string>(),
                             "/checkpoints/job-1/checkpoint-10.pt"))
      << job.dump();

  // Mistakes in settings files name the key.
  ASSERT_TRUE(common::WriteFileAtomically(Tmp("typo.json"), R"({"iters": 3})").ok());
  r = RunCommand(d->Ctl(absl::StrCat("submit --config ", Tmp("typo.json"))));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.output, "unknown key \"iters\"")) << r.output;
  ASSERT_TRUE(common::WriteFileAtomically(Tmp("daemon_bad.json"), R"({"max_queued": "ten"})")
                  .ok());
  auto bad = Daemon::Start(absl::StrCat("--config ", Tmp("daemon_bad.json")));
  EXPECT_EQ(bad->Wait(), 1);
  EXPECT_TRUE(absl::StrContains(bad->output(), "key \"max_queued\" must be an integer"))
      << bad->output();
}

}  // namespace
}  // namespace harmony::daemon_testing
