// The daemon on a shared server: a token by default (none, or another
// daemon's, is UNAUTHENTICATED), outputs never overwritten unless asked,
// paths only under the operator's roots, data sent as bytes, fetch; tokens
// with TLS. Real daemons on loopback, driven through harmony-ctl.

#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <torch/script.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "executor/client/client.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/daemon_fixture.h"

namespace harmony::daemon_testing {
namespace {

// With its defaults a daemon makes a token at its first start, readable
// only by its account, and answers nothing without it: a second local user
// (no token, or a token file of their own) is UNAUTHENTICATED. harmony-ctl
// finds the token in the state directory; a restart keeps it; --no-auth
// (loopback only) serves anyone, with a warning.
TEST_F(DaemonTest, ATokenByDefault) {
  const std::string state = Tmp("auth");
  auto d = Daemon::Start(StartFlags("auth", "cpu:2x1MiB"));
  ASSERT_FALSE(d->address().empty()) << d->output();
  EXPECT_EQ(d->token_file(), state + "/token");
  struct stat st;
  ASSERT_EQ(stat(d->token_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string token(absl::StripAsciiWhitespace(*common::ReadFileToString(d->token_file())));
  EXPECT_EQ(token.size(), 64u);

  auto r = RunCommand(CtlAs(*d, "list"));
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "needs its token")) << r.output;
  r = RunCommand(CtlAs(*d, "submit " + Tmp("plan2.pb") + " --model " + Tmp("g.pt") +
                            " --data " + Tmp("g_data.pt") + " --iterations 2"));
  EXPECT_EQ(r.exit_code, 5) << r.output;
  ASSERT_TRUE(common::WriteFileAtomically(Tmp("mine"), std::string(64, 'a')).ok());
  r = RunCommand(CtlAs(*d, "cancel job-1", Tmp("mine")));
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "wrong token")) << r.output;
  auto client = executor::ExecutorClient::Create([&] {
    executor::ClientOptions o;
    o.address = d->address();
    return o;
  }());
  EXPECT_EQ(client->ListJobs().status().code(), absl::StatusCode::kUnauthenticated);

  // harmony-ctl with the state directory (or HARMONY_STATE_DIR).
  r = RunCommand(CtlAs(*d, "list --state-dir " + state));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand("HARMONY_STATE_DIR=" + state + " " + CtlAs(*d, "list"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // A state directory it cannot read the token from says what to do.
  r = RunCommand(CtlAs(*d, "list --state-dir " + Tmp("nowhere")));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.output, "cannot read the daemon's token")) << r.output;

  // Restarted, it keeps its token.
  d->Signal(SIGTERM);
  d->Wait();
  d = Daemon::Start(StartFlags("auth", "cpu:2x1MiB"));
  ASSERT_FALSE(d->address().empty()) << d->output();
  EXPECT_EQ(std::string(absl::StripAsciiWhitespace(*common::ReadFileToString(d->token_file()))),
            token);
  d->Signal(SIGTERM);
  d->Wait();

  // --token-group: the group may read it too.
  struct group* g = getgrgid(getgid());
  ASSERT_NE(g, nullptr);
  auto grouped = Daemon::Start(absl::StrCat(StartFlags("auth_group", "cpu:2x1MiB"),
                                            " --token-group ", g->gr_name));
  ASSERT_FALSE(grouped->address().empty()) << grouped->output();
  ASSERT_EQ(stat(grouped->token_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(st.st_gid, g->gr_gid);
  auto no_group = Daemon::Start(absl::StrCat(StartFlags("auth_nogroup", "cpu:2x1MiB"),
                                             " --token-group no-such-group-here"));
  EXPECT_EQ(no_group->Wait(), 1);
  EXPECT_TRUE(absl::StrContains(no_group->output(), "no-such-group-here: no such group"))
      << no_group->output();

  // --no-auth: anyone on this machine, and the log says so.
  auto open = Daemon::Start(absl::StrCat(StartFlags("auth_open", "cpu:2x1MiB"), " --no-auth"));
  ASSERT_FALSE(open->address().empty()) << open->output();
  EXPECT_TRUE(open->token_file().empty());
  EXPECT_EQ(RunCommand(CtlAs(*open, "list")).exit_code, 0);
  EXPECT_TRUE(absl::StrContains(open->output(), "warning: --no-auth")) << open->output();
  EXPECT_FALSE(std::filesystem::exists(Tmp("auth_open") + "/token"));
}

// --out never replaces a file unless the job says --overwrite: the
// daemon's account may write where its caller may not (its ~/.bashrc).
TEST_F(DaemonTest, AnExistingOutputIsLeftAlone) {
  auto d = Daemon::Start(StartFlags("overwrite", "cpu:2x1MiB"));
  ASSERT_FALSE(d->address().empty()) << d->output();
  const std::string precious = Tmp("precious.txt");
  ASSERT_TRUE(common::WriteFileAtomically(precious, "export PATH=/usr/bin\n").ok());
  auto r = RunCommand(Submit(*d, "plan2", "--iterations 2 --wait --out " + precious));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "precious.txt exists; it is left as it is")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "--overwrite")) << r.output;
  EXPECT_EQ(*common::ReadFileToString(precious), "export PATH=/usr/bin\n");
  EXPECT_FALSE(absl::StrContains(RunCommand(d->Ctl("list")).output, "job-")) << "admitted";
  // Said so, it is replaced by the trained model.
  r = RunCommand(Submit(*d, "plan2", "--iterations 2 --wait --overwrite --checkpoint-interval 1 "
                                     "--out " + precious));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NO_THROW(torch::jit::load(precious));

  // harmony-ctl fetch brings the same bytes back, written by the caller; an
  // existing file is left alone unless --overwrite; --checkpoint the latest.
  const std::string fetched = Tmp("fetched.pt");
  std::filesystem::remove(fetched);
  r = RunCommand(d->Ctl("fetch job-1 -o " + fetched));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(*common::ReadFileToString(fetched), *common::ReadFileToString(precious));
  r = RunCommand(d->Ctl("fetch job-1 -o " + fetched));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "exists; it is left as it is")) << r.output;
  r = RunCommand(d->Ctl("fetch job-1 --checkpoint --overwrite -o " + fetched));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json job = Json(d->Ctl("status job-1 --json"));
  EXPECT_EQ(*common::ReadFileToString(fetched),
            *common::ReadFileToString(job["checkpoint_path"].get<std::string>()));
  r = RunCommand(CtlAs(*d, "fetch job-1 -o " + Tmp("stolen.pt")));
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_FALSE(std::filesystem::exists(Tmp("stolen.pt")));
  r = RunCommand(d->Ctl("fetch job-9 -o " + Tmp("none.pt")));
  EXPECT_EQ(r.exit_code, 4) << r.output;
}

// A job names files only under the roots the operator allows (here the
// test's directory and the working directory): /etc/passwd as data, an
// output outside, a link inside that points outside are refused at submit,
// naming the flag and the roots; the daemon keeps serving.
TEST_F(DaemonTest, PathsOutsideTheAllowedRootsAreRefused) {
  auto d = Daemon::Start(StartFlags("paths", "cpu:2x1MiB"));
  ASSERT_FALSE(d->address().empty()) << d->output();
  const std::string plan = Tmp("plan2.pb"), model = Tmp("g.pt");
  auto submit = [&](const std::string& flags) {
    return RunCommand(d->Ctl(absl::StrCat("submit ", plan, " --model ", model,
                                          " --by-path --iterations 2 ", flags)));
  };
  auto r = submit("--data /etc/passwd");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "--data /etc/passwd is outside the paths")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "--allow-path")) << r.output;
  r = submit(absl::StrCat("--data ", Tmp("g_data.pt"), " --out /usr/harmony-out.pt"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "--out /usr/harmony-out.pt is outside")) << r.output;
  std::filesystem::remove(Tmp("passwd_link"));
  std::filesystem::create_symlink("/etc/passwd", Tmp("passwd_link"));
  r = submit("--data " + Tmp("passwd_link"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "is outside the paths")) << r.output;
  // Under the roots it is admitted and trains.
  r = submit(absl::StrCat("--data ", Tmp("g_data.pt"), " --wait"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(d->output(), "jobs may name files under")) << d->output();
  // By default harmony-ctl sends small files' bytes: the daemon keeps them
  // in its state directory and opens nothing the caller named.
  r = RunCommand(d->Ctl(absl::StrCat("submit ", plan, " --model ", model, " --data ",
                                     Tmp("g_data.pt"), " --iterations 2 --wait")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json job = Json(d->Ctl("status job-2 --json"));
  EXPECT_TRUE(absl::StrContains(job["data_path"].get<std::string>(), "paths/data/"))
      << job.dump();
  EXPECT_EQ(job["model_path"].get<std::string>().find(Tmp("g.pt")), std::string::npos)
      << job.dump();
}

TEST_F(DaemonTest, TokensAndTls) {
  ASSERT_TRUE(common::WriteFileAtomically(Tmp("token"), "s3cret\n").ok());
  ASSERT_TRUE(common::WriteFileAtomically(Tmp("wrong_token"), "guess").ok());
  // Not loopback and no token: refused before listening.
  auto open = Daemon::Start("--listen 0.0.0.0:0 --no-auth --devices cpu:1x1MiB --state-dir " +
                            Tmp("open"));
  EXPECT_EQ(open->Wait(), 1);
  EXPECT_TRUE(absl::StrContains(open->output(), "without a token")) << open->output();

  auto r = RunCommand(absl::StrCat(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
      "subjectAltName=IP:127.0.0.1,DNS:localhost -keyout ",
      Tmp("key.pem"), " -out ", Tmp("cert.pem")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto d = Daemon::Start(absl::StrCat(StartFlags("tls", "cpu:2x1MiB"), " --auth-token-file ",
                                      Tmp("token"), " --tls-cert ", Tmp("cert.pem"),
                                      " --tls-key ", Tmp("key.pem")));
  ASSERT_FALSE(d->address().empty()) << d->output();
  const std::string tls = absl::StrCat(" --tls-ca ", Tmp("cert.pem"));
  EXPECT_EQ(d->token_file(), Tmp("token"));
  r = RunCommand(CtlAs(*d, "list" + tls));
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "needs its token")) << r.output;
  r = RunCommand(d->Ctl(absl::StrCat("list", tls, " --token-file ", Tmp("wrong_token"))));
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "wrong token")) << r.output;
  r = RunCommand(d->Ctl(absl::StrCat("watch job-1", tls, " --token-file ", Tmp("wrong_token"))));
  EXPECT_EQ(r.exit_code, 5) << r.output;
  // Plain text to a TLS daemon does not get through.
  r = RunCommand(d->Ctl(absl::StrCat("list --token-file ", Tmp("token"))));
  EXPECT_EQ(r.exit_code, 3) << r.output;
  r = RunCommand(Submit(*d, "plan2", absl::StrCat("--iterations 2 --wait", tls, " --token-file ",
                                                  Tmp("token"), " --upload-model")));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(d->Ctl(absl::StrCat("status job-1", tls, " --token-file ", Tmp("token"))));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "SUCCEEDED")) << r.output;
}

}  // namespace
}  // namespace harmony::daemon_testing
