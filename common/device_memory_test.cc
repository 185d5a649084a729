#include "common/device_memory.h"

#include <thread>

#include <ATen/ATen.h>

#include "gtest/gtest.h"

namespace harmony::common {
namespace {

class DeviceMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override { InstallDeviceMemoryAccounting(); }
};

TEST_F(DeviceMemoryTest, CountsWhatIsAllocatedInScopeUntilFreed) {
  DeviceMemory memory("cpu:0", 1 << 20);
  {
    at::Tensor outside = at::empty({1000}, at::kFloat);  // Not counted.
    DeviceMemoryScope scope(&memory);
    at::Tensor a = at::empty({1000}, at::kFloat);
    EXPECT_EQ(memory.used(), 4000u);
    {
      at::Tensor b = at::ones({500}, at::kDouble);
      EXPECT_EQ(memory.used(), 8000u);
    }
    EXPECT_EQ(memory.used(), 4000u);
    EXPECT_EQ(memory.peak(), 8000u);
  }
  EXPECT_EQ(memory.used(), 0u);
  memory.ResetPeak();
  EXPECT_EQ(memory.peak(), 0u);
}

TEST_F(DeviceMemoryTest, PeakNamesWhatWasAllocating) {
  DeviceMemory memory("cpu:0", 1 << 20);
  at::Tensor kept;
  {
    DeviceMemoryScope scope(&memory, "weights in");
    kept = at::empty({1000}, at::kFloat);
  }
  EXPECT_EQ(memory.peak_activity(), "weights in");
  {
    DeviceMemoryScope scope(&memory, "backward");
    at::Tensor big = at::empty({2000}, at::kFloat);
  }
  EXPECT_EQ(memory.peak_activity(), "backward");
  {
    DeviceMemoryScope scope(&memory, "small");  // Below the peak: not named.
    at::Tensor small = at::empty({10}, at::kFloat);
  }
  EXPECT_EQ(memory.peak_activity(), "backward");
  memory.ResetPeak();
  EXPECT_EQ(memory.peak_activity(), "");
}

TEST_F(DeviceMemoryTest, TemporariesOfAnOpCountTowardsThePeak) {
  DeviceMemory memory("cpu:0", 64 << 20);
  at::Tensor x = at::randn({256, 256});
  {
    DeviceMemoryScope scope(&memory);
    at::Tensor y = at::matmul(x, x).relu().sum();
  }
  EXPECT_EQ(memory.used(), 0u);
  EXPECT_GE(memory.peak(), 256u * 256 * 4);
}

TEST_F(DeviceMemoryTest, OverCapacityIsOutOfMemoryNamingDeviceAndBytes) {
  DeviceMemory memory("cpu:1", 1 << 20);
  DeviceMemoryScope scope(&memory, "vLayer 3 forward");
  at::Tensor a = at::empty({200000}, at::kFloat);  // 800 kB fits.
  at::Tensor w;
  {
    DeviceMemoryScope weights(&memory, "weights in");
    w = at::empty({50000}, at::kFloat);  // 200 kB more fits.
  }
  try {
    at::Tensor b = at::empty({100000}, at::kFloat);  // 400 kB does not.
    FAIL() << "allocation over capacity succeeded";
  } catch (const c10::OutOfMemoryError& e) {
    const std::string message = e.what_without_backtrace();
    EXPECT_NE(message.find("out of memory on device cpu:1 (vLayer 3 forward)"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("allocating 390.62 KiB"), std::string::npos) << message;
    EXPECT_NE(message.find("of 1.00 MiB in use"), std::string::npos) << message;
    // What holds the device, by the activity that allocated it.
    EXPECT_NE(message.find("; held by vLayer 3 forward: 781.25 KiB, weights in: 195.31 KiB"),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(memory.used(), 1000000u);  // The failed allocation left nothing.
}

TEST_F(DeviceMemoryTest, FreeOnAnotherThreadAndNestedScopes) {
  DeviceMemory a("cpu:0", 1 << 20);
  DeviceMemory b("cpu:1", 1 << 20);
  at::Tensor t;
  {
    DeviceMemoryScope scope_a(&a);
    {
      DeviceMemoryScope scope_b(&b);
      t = at::empty({100}, at::kFloat);
    }
    at::Tensor u = at::empty({10}, at::kFloat);
    EXPECT_EQ(a.used(), 40u);
  }
  EXPECT_EQ(b.used(), 400u);
  std::thread([moved = std::move(t)]() mutable { moved.reset(); }).join();
  EXPECT_EQ(b.used(), 0u);
  EXPECT_EQ(a.used(), 0u);
}

TEST_F(DeviceMemoryTest, DeviceMayGoBeforeItsTensors) {
  at::Tensor t;
  std::weak_ptr<DeviceMemory::State> state;
  {
    DeviceMemory memory("cpu:0", 1 << 20);
    state = memory.state();
    DeviceMemoryScope scope(&memory);
    t = at::empty({100}, at::kFloat);
  }
  // The storage keeps the counters alive until it is freed.
  EXPECT_FALSE(state.expired());
  t.reset();
  EXPECT_TRUE(state.expired());
}

// Freed storages are reused for the same size, as a GPU's caching
// allocator does: only live bytes count, and the cache gives way when an
// allocation needs its room.
TEST_F(DeviceMemoryTest, FreedStoragesAreReusedWithoutCounting) {
  DeviceMemory memory("cpu:0", 10000);
  DeviceMemoryScope scope(&memory);
  void* first = nullptr;
  {
    at::Tensor a = at::empty({1000}, at::kFloat);
    first = a.data_ptr();
  }
  EXPECT_EQ(memory.allocations(), 1u);
  EXPECT_EQ(memory.used(), 0u);
  {
    at::Tensor again = at::empty({1000}, at::kFloat);  // Same size: reused.
    EXPECT_EQ(again.data_ptr(), first);
    EXPECT_EQ(memory.used(), 4000u);
    at::Tensor other = at::empty({500}, at::kFloat);  // Another size: fresh.
  }
  EXPECT_EQ(memory.allocations(), 2u);
  EXPECT_EQ(memory.reused(), 1u);
  EXPECT_EQ(memory.peak(), 6000u);
  // 6000 bytes cached; 9000 live still fit: the cache is trimmed, no error.
  at::Tensor big = at::empty({2250}, at::kFloat);
  EXPECT_EQ(memory.used(), 9000u);
  EXPECT_EQ(memory.allocations(), 3u);
}

}  // namespace
}  // namespace harmony::common
