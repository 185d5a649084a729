// The host link's use per direction (HostLink::TakeUse): bytes, and the
// seconds during which at least one copy was crossing.

#include "executor/runtime/host_link.h"

#include <thread>

#include "gtest/gtest.h"

namespace harmony::executor {
namespace {

// Not emulated: copies that overlap count once (two devices copying at
// once keep the link busy for the union of their spans, not the sum).
TEST(HostLinkTest, OverlappingCopiesCountOnce) {
  HostLink link(0);
  const double now = link.Now();
  link.Cross(LinkDirection::kToDevice, 300, now - 0.3);  // Began 0.3 s ago.
  link.Cross(LinkDirection::kToDevice, 100, now - 0.1);  // Within it.
  const double after = link.Now();
  const LinkUse use = link.TakeUse(LinkDirection::kToDevice);
  EXPECT_EQ(use.bytes, 400u);
  EXPECT_GE(use.busy_s, 0.3);
  EXPECT_LE(use.busy_s, 0.3 + (after - now));  // Not 0.4.
  // Taken: the next use starts afresh, and the other direction saw nothing.
  EXPECT_EQ(link.TakeUse(LinkDirection::kToDevice).bytes, 0u);
  EXPECT_EQ(link.TakeUse(LinkDirection::kToDevice).busy_s, 0);
  EXPECT_EQ(link.TakeUse(LinkDirection::kToHost).bytes, 0u);
}

// Emulated: copies of two threads cross one after another, and the link
// is busy for their bytes at its rate.
TEST(HostLinkTest, EmulatedCopiesQueueAndRunAtTheRate) {
  HostLink link(1e9);  // 1 GB/s: 1 MB in 1 ms.
  std::thread other([&] { link.Cross(LinkDirection::kToHost, 1000000, link.Now()); });
  link.Cross(LinkDirection::kToHost, 1000000, link.Now());
  other.join();
  const LinkUse use = link.TakeUse(LinkDirection::kToHost);
  EXPECT_EQ(use.bytes, 2000000u);
  EXPECT_NEAR(use.busy_s, 0.002, 1e-9);
  EXPECT_EQ(link.TakeUse(LinkDirection::kToDevice).bytes, 0u);
}

}  // namespace
}  // namespace harmony::executor
