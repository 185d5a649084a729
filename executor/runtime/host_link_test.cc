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
  EXPECT_EQ(use.copies, 0);  // Lateness is the emulation's.
  EXPECT_EQ(use.late_s, 0);
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
  EXPECT_EQ(use.copies, 2);
  EXPECT_GE(use.late_s, use.late_max_s);
  EXPECT_EQ(link.TakeUse(LinkDirection::kToDevice).bytes, 0u);
}

// Emulated: a copy let go after its emulated end counts as late by the
// difference, summed with the others and the largest kept; taken, the count
// starts afresh.
TEST(HostLinkTest, EmulatedCopiesCountHowLateTheyCameBack) {
  HostLink link(1e9);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // The clock past 0.05 s.
  const double now = link.Now();
  // 1 kB in 1 us, begun 50 ms ago: it ended about 50 ms before the call.
  link.Cross(LinkDirection::kToDevice, 1000, now - 0.05);
  const double after = link.Now();
  // On time: 1 MB in 1 ms from now, slept until its end (precisely).
  link.Cross(LinkDirection::kToDevice, 1000000, link.Now());
  const LinkUse use = link.TakeUse(LinkDirection::kToDevice);
  EXPECT_EQ(use.copies, 2);
  EXPECT_GE(use.late_max_s, 0.05 - 1e-6);
  EXPECT_LE(use.late_max_s, 0.05 + (after - now));
  EXPECT_GE(use.late_s, use.late_max_s);
  EXPECT_LT(use.late_s - use.late_max_s, 0.02);  // The second came back in time.
  const LinkUse again = link.TakeUse(LinkDirection::kToDevice);
  EXPECT_EQ(again.copies, 0);
  EXPECT_EQ(again.late_s, 0);
  EXPECT_EQ(again.late_max_s, 0);
}

}  // namespace
}  // namespace harmony::executor
