// Collectives across ranks on loopback : 3 ranks, one
// thread each, each with its own store client and process group, as
// separate servers would have. What Gloo in LibTorch 1.13 does and does not
// do is pinned here; a peer that never comes is an error within the
// timeout, not a hang.

#include "executor/dist/collective.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace harmony::executor {
namespace {

using ::testing::HasSubstr;

// A port free now (bound, read, closed).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// Runs `body(rank, collective)` on `n` ranks at once.
void OnRanks(int n, const std::function<void(int, Collective&)>& body) {
  const int port = FreePort();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      CollectiveOptions o;
      o.store_port = port;
      o.rank = r;
      o.world_size = n;
      o.timeout = absl::Seconds(30);
      absl::StatusOr<std::unique_ptr<Collective>> c = Collective::Join(o);
      ASSERT_TRUE(c.ok()) << c.status();
      body(r, **c);
    });
  }
  for (std::thread& t : threads) t.join();
}

TEST(CollectiveTest, SumsGathersAndBroadcastsAcrossThreeRanks) {
  OnRanks(3, [](int r, Collective& c) {
    EXPECT_EQ(c.rank(), r);
    EXPECT_EQ(c.world_size(), 3);
    // allreduce: 1 + 2 + 3 on every rank, two tensors at once.
    std::vector<at::Tensor> t = {at::full({5}, r + 1.0f), at::full({2, 2}, 10.0f * (r + 1))};
    ASSERT_TRUE(c.AllReduceSum(t).ok());
    EXPECT_TRUE(at::equal(t[0], at::full({5}, 6.0f)));
    EXPECT_TRUE(at::equal(t[1], at::full({2, 2}, 60.0f)));
    // reduce to rank 2: only the root has the sum.
    std::vector<at::Tensor> u = {at::full({4}, r + 1.0f)};
    ASSERT_TRUE(c.ReduceSumTo(u, 2).ok());
    if (r == 2) EXPECT_TRUE(at::equal(u[0], at::full({4}, 6.0f)));
    // broadcast from rank 1.
    std::vector<at::Tensor> b = {at::full({3}, static_cast<float>(r))};
    ASSERT_TRUE(c.Broadcast(b, 1).ok());
    EXPECT_TRUE(at::equal(b[0], at::full({3}, 1.0f)));
    // allgather, by rank.
    std::vector<at::Tensor> all;
    ASSERT_TRUE(c.AllGather(at::full({2}, 100.0f + r), all).ok());
    ASSERT_EQ(all.size(), 3u);
    for (int k = 0; k < 3; ++k) EXPECT_TRUE(at::equal(all[k], at::full({2}, 100.0f + k)));
    ASSERT_TRUE(c.Barrier().ok());
    EXPECT_EQ(c.bytes(), 5 * 4 + 4 * 4 + 4 * 4 + 3 * 4 + 2 * 4u);
    // A loss's mean: (1 + 2 + 3) / 3.
    absl::StatusOr<double> mean = c.AllReduceMean(r + 1.0);
    ASSERT_TRUE(mean.ok()) << mean.status();
    EXPECT_DOUBLE_EQ(*mean, 2.0);
  });
}

TEST(CollectiveTest, BadWorldsAndAbsentPeersAreErrorsNotHangs) {
  CollectiveOptions o;
  o.store_port = FreePort();
  o.rank = 2;
  o.world_size = 2;
  EXPECT_EQ(Collective::Join(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.rank = 0;
  o.store_port = 0;
  EXPECT_EQ(Collective::Join(o).status().code(), absl::StatusCode::kInvalidArgument);

  // Rank 1 of 2 whose store nobody hosts.
  o.store_port = FreePort();
  o.rank = 1;
  o.timeout = absl::Seconds(2);
  const absl::Time start = absl::Now();
  absl::Status s = Collective::Join(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("127.0.0.1:", o.store_port)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));

  // A world whose second rank stops taking part: the first rank's allreduce
  // fails within the timeout.
  const int port = FreePort();
  std::thread quitter([port] {
    CollectiveOptions q;
    q.store_port = port;
    q.rank = 1;
    q.world_size = 2;
    q.timeout = absl::Seconds(2);
    auto c = Collective::Join(q);
    ASSERT_TRUE(c.ok()) << c.status();
    // Leaves without the allreduce rank 0 waits in.
  });
  CollectiveOptions p;
  p.store_port = port;
  p.rank = 0;
  p.world_size = 2;
  p.timeout = absl::Seconds(2);
  auto c = Collective::Join(p);
  ASSERT_TRUE(c.ok()) << c.status();
  quitter.join();
  std::vector<at::Tensor> t = {at::ones({4})};
  s = (*c)->AllReduceSum(t);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("allreduce across 2 ranks failed"));
}

}  // namespace
}  // namespace harmony::executor
