#include "common/intra_op_threads.h"

#include <thread>

#include <torch/torch.h>

#include "gtest/gtest.h"

namespace harmony::common {
namespace {

TEST(ThreadsPerDeviceTest, DividesTheHostsThreadsAmongTheDevices) {
  EXPECT_EQ(*ThreadsPerDevice(0, 1), HostThreads());
  EXPECT_EQ(*ThreadsPerDevice(0, HostThreads()), 1);
  EXPECT_EQ(*ThreadsPerDevice(0, 4 * HostThreads()), 1);  // At least one each.
  EXPECT_EQ(*ThreadsPerDevice(3, 2), 3);                  // Asked for.
  absl::StatusOr<int> bad = ThreadsPerDevice(-1, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("got -1"), std::string::npos);
}

// The count is the calling thread's: kernels run after the setting keep it
// (LibTorch's lazy per-thread initialisation must not undo it), and other
// threads, the main one included, keep their own.
TEST(IntraOpThreadsTest, ApplyToTheCallingThreadOnly) {
  const int main_threads = CallingThreadIntraOpThreads();
  auto work = [] {
    at::Tensor a = torch::ones({1 << 20});
    at::Tensor b = a + a;  // A parallel kernel inside LibTorch.
    return b.sum().item<double>();
  };
  int seen[2] = {0, 0};
  std::thread one([&] {
    SetCallingThreadIntraOpThreads(3);
    EXPECT_EQ(work(), 2.0 * (1 << 20));
    seen[0] = CallingThreadIntraOpThreads();
  });
  std::thread two([&] {
    SetCallingThreadIntraOpThreads(5);
    EXPECT_EQ(work(), 2.0 * (1 << 20));
    seen[1] = CallingThreadIntraOpThreads();
  });
  one.join();
  two.join();
  EXPECT_EQ(seen[0], 3);
  EXPECT_EQ(seen[1], 5);
  EXPECT_EQ(CallingThreadIntraOpThreads(), main_threads);
  {
    ScopedIntraOpThreads scope(main_threads + 1);
    work();
    EXPECT_EQ(CallingThreadIntraOpThreads(), main_threads + 1);
  }
  EXPECT_EQ(CallingThreadIntraOpThreads(), main_threads);
}

}  // namespace
}  // namespace harmony::common
