// With the daemons: real harmony-exec daemons started by the test on
// loopback, each with its own virtual devices, port and state directory,
// driven with harmony-ctl submit --world. A world of 2 or 3 daemons trains
// what one server trains on the whole minibatch; kill -9 of one daemon ends
// the job FAILED on the others, naming it, within the timeout, and they
// keep serving; a cancel on rank 1's daemon cancels every rank; a world
// that cannot be admitted everywhere is admitted nowhere.

#include <signal.h>

#include <chrono>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <torch/script.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decomposer.h"
#include "common/files.h"
#include "executor/client/client.h"
#include "gtest/gtest.h"
#include "tests/daemon_process.h"
#include "tests/run_command.h"

namespace harmony {
namespace {

using testing::Daemon;
using testing::FreePort;
using testing::RunCommand;

const char kZoo[] = "zoo/harmony-zoo";
const char kPlan[] = "planner/harmony-plan";
const char kExec[] = "executor/harmony-exec";

// This run's own directory (testing::RunTempPath).
std::string Tmp(const std::string& name) { return testing::RunTempPath(name); }

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

class WorldDaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto r = RunCommand(absl::StrCat(kZoo, " mlp --depth 3 --width 64 --samples 48 -o ",
                                     Tmp("m.pt"), " --data ", Tmp("m_data.pt")));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (int minibatch : {8, 16, 24}) {
      r = RunCommand(absl::StrCat(kPlan, " ", Tmp("m.pt"), " --sample-input ", Tmp("m_data.pt"),
                                  " --gpus 2 --device-memory 1MiB --minibatch ", minibatch,
                                  " --microbatch 4 -o ", Tmp(absl::StrCat("m", minibatch, ".pb"))));
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
  }

  // `n` daemons, each with 2 devices of 1 MiB and a state dir of its own.
  static std::vector<std::unique_ptr<Daemon>> StartDaemons(int n, const std::string& name,
                                                           const std::string& flags = "") {
    std::vector<std::unique_ptr<Daemon>> out;
    // Daemons of one world share their token.
    const std::string token = Tmp("world_token");
    if (!std::filesystem::exists(token)) {
      EXPECT_TRUE(common::WriteFileAtomically(token, "one world's token\n").ok());
    }
    const std::string shared = absl::StrContains(flags, "--auth-token-file")
                                   ? ""
                                   : absl::StrCat(" --auth-token-file ", token);
    for (int r = 0; r < n; ++r) {
      out.push_back(Daemon::Start(absl::StrCat("--listen 127.0.0.1:0 --devices cpu:2x1MiB "
                                               "--state-dir ", Tmp(absl::StrCat(name, r)), " --allow-path ",
                                               ::testing::TempDir(), " ", flags, shared)));
      EXPECT_FALSE(out.back()->address().empty()) << out.back()->output();
    }
    return out;
  }

  static std::string WorldOf(const std::vector<std::unique_ptr<Daemon>>& daemons) {
    std::vector<std::string> addresses;
    for (const auto& d : daemons) addresses.push_back(d->address());
    return absl::StrJoin(addresses, ",");
  }

  static std::string Submit(const std::vector<std::unique_ptr<Daemon>>& daemons,
                            const std::string& flags, bool with_token = true) {
    const std::string args =
        absl::StrCat("submit ", Tmp("m8.pb"), " --model ", Tmp("m.pt"), " --data ",
                     Tmp("m_data.pt"), " --world ", WorldOf(daemons), " ", flags);
    if (with_token) return daemons[0]->Ctl(args);
    return absl::StrCat(testing::kCtlBinary, " ", args, " --address ", daemons[0]->address());
  }

  // The job as its own daemon has it (not asking the peers).
  static proto::Job Local(const Daemon& d, const std::string& id) {
    executor::ClientOptions o;
    o.address = d.address();
    o.token = std::string(absl::StripAsciiWhitespace(*common::ReadFileToString(d.token_file())));
    auto job = executor::ExecutorClient::Create(o)->GetJob(id, /*local_only=*/true);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : proto::Job();
  }

  // Polls until the job on `d` has trained `iterations`, at most a minute.
  static void WaitForIteration(const Daemon& d, const std::string& id, uint32_t iterations) {
    const auto start = std::chrono::steady_clock::now();
    while (Local(d, id).progress().iteration() < iterations && Seconds(start) < 60) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_GE(Local(d, id).progress().iteration(), iterations);
  }

  // Polls until the job has ended on `d`, at most `limit_s`.
  static proto::Job WaitForEnd(const Daemon& d, const std::string& id, double limit_s) {
    const auto start = std::chrono::steady_clock::now();
    proto::Job job;
    do {
      job = Local(d, id);
      if (job.state() >= proto::SUCCEEDED) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } while (Seconds(start) < limit_s);
    return job;
  }
};

// "job-3 (world-...: rank 0 A job-3, rank 1 B job-1, ...)": the job ids.
std::vector<std::string> JobIds(const std::string& output) {
  std::vector<std::string> ids;
  size_t at = 0;
  while ((at = output.find("rank ", at)) != std::string::npos) {
    const size_t id = output.find(" job-", output.find(' ', at + 5) + 1);
    if (id == std::string::npos) break;
    const size_t end = output.find_first_of(",)", id);
    ids.push_back(output.substr(id + 1, end - id - 1));
    at = end;
  }
  return ids;
}

TEST_F(WorldDaemonTest, TwoAndThreeDaemonsTrainAsOneServer) {
  for (const auto& [n, optimizer, shard] :
       std::vector<std::tuple<int, std::string, bool>>{
           {2, "--optimizer adam --lr 0.01", true}, {3, "--optimizer sgd --momentum 0.9 --lr 0.05",
                                                     false}}) {
    SCOPED_TRACE(absl::StrCat(n, " daemons"));
    auto daemons = StartDaemons(n, absl::StrCat("train", n, "_"));
    const std::string out = Tmp(absl::StrCat("world", n, ".pt"));
    auto r = RunCommand(Submit(daemons, absl::StrCat("--iterations 4 ", optimizer, " --out ", out,
                                                     shard ? " --shard-optimizer-state" : "",
                                                     " --wait")));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<std::string> ids = JobIds(r.output);
    ASSERT_EQ(ids.size(), static_cast<size_t>(n)) << r.output;
    // Status on the last rank's daemon shows the world and every rank.
    r = RunCommand(daemons[n - 1]->Ctl(absl::StrCat("status ", ids[n - 1])));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(Contains(r.output, absl::StrCat("rank ", n - 1, " of ", n))) << r.output;
    for (int k = 0; k < n; ++k) {
      EXPECT_TRUE(Contains(r.output, absl::StrCat("rank ", k, ": ", daemons[k]->address(), " ",
                                                  ids[k], " SUCCEEDED, iteration 4")))
          << r.output;
    }
    // One server on the whole minibatch.
    const std::string one = Tmp(absl::StrCat("one", n, ".pt"));
    r = RunCommand(absl::StrCat(kExec, " run ", Tmp(absl::StrCat("m", 8 * n, ".pb")),
                                " --model ", Tmp("m.pt"), " --data ", Tmp("m_data.pt"),
                                " --devices cpu:2x1MiB --iterations 4 ", optimizer, " --out ", one));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    torch::jit::Module got = torch::jit::load(out);
    torch::jit::Module want = torch::jit::load(one);
    torch::jit::Module initial = torch::jit::load(Tmp("m.pt"));
    int checked = 0;
    for (const auto& p : got.named_parameters()) {
      const at::Tensor w = *common::ResolveTensor(want, p.name);
      const double step = (w - *common::ResolveTensor(initial, p.name)).norm().item<double>();
      const double diff = (p.value - w).norm().item<double>();
      EXPECT_LE(diff, 1e-6 * w.norm().item<double>()) << p.name;
      EXPECT_LE(diff, 1e-5 * step) << p.name;
      ++checked;
    }
    EXPECT_EQ(checked, 8);
  }
}

TEST_F(WorldDaemonTest, KillNineOfOneDaemonFailsTheJobOnTheOthersNamingIt) {
  auto daemons = StartDaemons(3, "kill");
  auto r = RunCommand(Submit(daemons, "--iterations 1000000 --world-timeout 5"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<std::string> ids = JobIds(r.output);
  ASSERT_EQ(ids.size(), 3u) << r.output;
  // Training under way everywhere.
  ASSERT_NO_FATAL_FAILURE(WaitForIteration(*daemons[2], ids[2], 2));
  daemons[1]->Signal(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  for (int k : {0, 2}) {
    const proto::Job job = WaitForEnd(*daemons[k], ids[k], 30);
    EXPECT_EQ(job.state(), proto::FAILED) << job.reason();
    EXPECT_TRUE(Contains(job.reason(),
                         absl::StrCat("lost rank 1 (daemon ", daemons[1]->address(), " ", ids[1],
                                      ")")))
        << job.reason();
  }
  EXPECT_LT(Seconds(killed), 5 + 10);
  // The survivors keep serving, their memory freed: a world of the two
  // trains to the end.
  for (int k : {0, 2}) {
    r = RunCommand(daemons[k]->Ctl("devices"));
    EXPECT_TRUE(Contains(r.output, "0 B reserved by running jobs")) << r.output;
  }
  std::vector<std::unique_ptr<Daemon>> two;
  two.push_back(std::move(daemons[0]));
  two.push_back(std::move(daemons[2]));
  r = RunCommand(Submit(two, "--iterations 3 --wait"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "SUCCEEDED")) << r.output;
}

TEST_F(WorldDaemonTest, CancelOnANonZeroRankCancelsEverywhere) {
  auto daemons = StartDaemons(2, "cancel");
  auto r = RunCommand(Submit(daemons, "--iterations 1000000 --checkpoint-interval 100000"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<std::string> ids = JobIds(r.output);
  ASSERT_EQ(ids.size(), 2u) << r.output;
  ASSERT_NO_FATAL_FAILURE(WaitForIteration(*daemons[0], ids[0], 2));
  r = RunCommand(daemons[1]->Ctl(absl::StrCat("cancel ", ids[1])));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const proto::Job zero = WaitForEnd(*daemons[0], ids[0], 30);
  const proto::Job one = WaitForEnd(*daemons[1], ids[1], 30);
  EXPECT_EQ(zero.state(), proto::CANCELLED) << zero.reason();
  EXPECT_EQ(one.state(), proto::CANCELLED) << one.reason();
  // Both stopped after the same iteration; rank 0 checkpointed it.
  EXPECT_EQ(zero.progress().iteration(), one.progress().iteration());
  EXPECT_EQ(zero.checkpoint_iteration(), zero.progress().iteration());
  EXPECT_FALSE(zero.checkpoint_path().empty());
  EXPECT_TRUE(one.checkpoint_path().empty());
  // The world's checkpoint (2 x 8) resumes on one daemon planned at 16:
  // resubmitted by job id to rank 0's daemon, for 2 more iterations.
  const uint32_t at = zero.checkpoint_iteration();
  r = RunCommand(daemons[0]->Ctl(absl::StrCat(
      "submit ", Tmp("m16.pb"), " --model ", Tmp("m.pt"), " --data ", Tmp("m_data.pt"),
      " --iterations ", at + 2, " --resume ", ids[0], " --wait")));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, absl::StrCat("iteration ", at + 2, "/", at + 2))) << r.output;
  // On 3 daemons of 8 (a global minibatch of 24) it is refused, saying why.
  auto third = StartDaemons(1, "cancel_third");
  daemons.push_back(std::move(third[0]));
  r = RunCommand(Submit(daemons, absl::StrCat("--iterations ", at + 2, " --resume ", ids[0],
                                              " --wait")));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "this run's is 24 (3 servers x 8)")) << r.output;
}

// Daemons with a token and TLS: the submitter's calls and the daemons' calls
// to each other (status of the peers' ranks, a cancel passed on) use them.
TEST_F(WorldDaemonTest, TokensAndTlsBetweenDaemons) {
  auto r = RunCommand(absl::StrCat(
      "printf s3cret > ", Tmp("token"), " && openssl req -x509 -newkey rsa:2048 -nodes -days 1 "
      "-subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout ",
      Tmp("key.pem"), " -out ", Tmp("cert.pem"), " 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto daemons = StartDaemons(2, "tls", absl::StrCat("--auth-token-file ", Tmp("token"),
                                                     " --tls-cert ", Tmp("cert.pem"),
                                                     " --tls-key ", Tmp("key.pem")));
  const std::string auth =
      absl::StrCat(" --token-file ", Tmp("token"), " --tls-ca ", Tmp("cert.pem"));
  // Without the token: refused everywhere, nothing admitted.
  r = RunCommand(
      Submit(daemons, absl::StrCat("--iterations 3 --tls-ca ", Tmp("cert.pem")), false));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "admitted on none")) << r.output;
  r = RunCommand(Submit(daemons, absl::StrCat("--iterations 1000000", auth)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<std::string> ids = JobIds(r.output);
  ASSERT_EQ(ids.size(), 2u) << r.output;
  // Status from rank 1's daemon reaches rank 0's over TLS with the token.
  const auto start = std::chrono::steady_clock::now();
  do {
    r = RunCommand(daemons[1]->Ctl(absl::StrCat("status ", ids[1], auth)));
  } while (!Contains(r.output, "rank 0: " + daemons[0]->address() + " " + ids[0] + " RUNNING") &&
           Seconds(start) < 60);
  EXPECT_TRUE(Contains(r.output, "rank 0: " + daemons[0]->address() + " " + ids[0] + " RUNNING"))
      << r.output;
  EXPECT_FALSE(Contains(r.output, "unreachable")) << r.output;
  // A cancel on rank 0's daemon is passed on to rank 1's.
  r = RunCommand(daemons[0]->Ctl(absl::StrCat("cancel ", ids[0], auth)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(Contains(r.output, "not reached")) << r.output;
  executor::ClientOptions o;
  o.address = daemons[1]->address();
  o.token = "s3cret";
  o.tls_root_certs = *common::ReadFileToString(Tmp("cert.pem"));
  auto client = executor::ExecutorClient::Create(o);
  proto::Job one;
  const auto cancelled = std::chrono::steady_clock::now();
  do {
    one = *client->GetJob(ids[1], true);
  } while (one.state() < proto::SUCCEEDED && Seconds(cancelled) < 30);
  EXPECT_EQ(one.state(), proto::CANCELLED) << one.reason();
}

TEST_F(WorldDaemonTest, AWorldIsAdmittedEverywhereOrNowhere) {
  auto daemons = StartDaemons(2, "admit");
  const std::string job = absl::StrCat("submit ", Tmp("m8.pb"), " --model ", Tmp("m.pt"),
                                       " --data ", Tmp("m_data.pt"), " --iterations 3 --world ");
  // A daemon named twice.
  auto r = RunCommand(daemons[0]->Ctl(absl::StrCat(job, daemons[0]->address(), ",",
                                                   daemons[0]->address())));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, absl::StrCat("lists daemon ", daemons[0]->address(), " twice")))
      << r.output;
  // A peer that does not answer: nothing runs anywhere.
  const std::string absent = absl::StrCat("127.0.0.1:", FreePort());
  r = RunCommand(daemons[0]->Ctl(absl::StrCat(job, daemons[0]->address(), ",", absent)));
  EXPECT_EQ(r.exit_code, 3) << r.output;  // Unavailable.
  EXPECT_TRUE(Contains(r.output, absl::StrCat("admitted on none of the 2 daemons: rank 1 (",
                                              absent, "): daemon unreachable")))
      << r.output;
  // A peer that refuses it (its devices are too small for the plan).
  auto small = Daemon::Start(absl::StrCat("--listen 127.0.0.1:0 --devices cpu:2x64KiB "
                                          "--state-dir ", Tmp("admit_small"), " --allow-path ",
                                          ::testing::TempDir(),
                                          " --auth-token-file ", Tmp("world_token")));
  r = RunCommand(daemons[0]->Ctl(absl::StrCat(job, daemons[0]->address(), ",",
                                              small->address())));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, absl::StrCat("rank 1 (", small->address(), ")"))) << r.output;
  r = RunCommand(daemons[0]->Ctl("list"));
  EXPECT_FALSE(Contains(r.output, "QUEUED")) << r.output;
  EXPECT_FALSE(Contains(r.output, "RUNNING")) << r.output;
  r = RunCommand(small->Ctl("list"));
  EXPECT_FALSE(Contains(r.output, "job-")) << r.output;
  // A daemon with a token of its own (its default) is not of this world.
  auto other = Daemon::Start(absl::StrCat("--listen 127.0.0.1:0 --devices cpu:2x1MiB "
                                          "--state-dir ", Tmp("admit_other"), " --allow-path ",
                                          ::testing::TempDir()));
  ASSERT_FALSE(other->address().empty()) << other->output();
  r = RunCommand(daemons[0]->Ctl(absl::StrCat(job, daemons[0]->address(), ",",
                                              other->address())));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, absl::StrCat("rank 1 (", other->address(), ")"))) << r.output;
  EXPECT_TRUE(Contains(r.output, "the same --auth-token-file")) << r.output;
  r = RunCommand(other->Ctl("list"));
  EXPECT_FALSE(Contains(r.output, "job-")) << r.output;
}

}  // namespace
}  // namespace harmony
