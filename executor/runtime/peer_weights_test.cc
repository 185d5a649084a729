#include "executor/runtime/peer_weights.h"

#include <thread>

#include <ATen/ATen.h>

#include "gtest/gtest.h"

namespace harmony::executor {
namespace {

using plan::Channel;
using plan::Task;
using plan::TaskGraph;
using plan::Transfer;
using plan::TransferKind;

// Device 0's task 0 swaps pack 0 in; device 1's task 1 copies it from there.
TaskGraph TwoDevices(int copy_from_device = 0) {
  TaskGraph g;
  g.config.num_devices = 2;
  for (int d = 0; d < 2; ++d) {
    Task t;
    t.id = d;
    t.device = d;
    t.vlayers = {0, 2};
    Transfer in;
    in.kind = TransferKind::kWeightsIn;
    if (d == 1) {
      in.channel = Channel::kPeer;
      in.peer_device = copy_from_device;
    }
    t.transfers.push_back(in);
    g.tasks.push_back(t);
  }
  return g;
}

TEST(PeerWeightsTest, CopiersTakeWhatTheSourcePublishedAndFreeItsRoom) {
  auto p = PeerWeights::Create(TwoDevices(), 2);
  ASSERT_TRUE(p.ok()) << p.status();
  PeerWeights& w = **p;
  EXPECT_FALSE(w.SourceOf(0).has_value());
  ASSERT_EQ(w.SourceOf(1), 0);
  EXPECT_EQ(*w.WaitForRoom(0, 0), -1);  // Nothing published yet.

  std::thread copier([&] {
    absl::StatusOr<PeerWeights::Published> got = w.Take(0);  // Waits for it.
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->device, 0);
    ASSERT_EQ(got->params.size(), 2u);
    EXPECT_FALSE(got->params[0][0].requires_grad());  // Detached.
    EXPECT_EQ(got->params[1][0].item<float>(), 2.0f);
    w.Taken(0);
  });
  at::Tensor a = at::ones({2}).requires_grad_(true);
  at::Tensor b = at::full({1}, 2.0);
  w.Publish(0, 0, {{a}, {b}});
  w.Publish(1, 1, {{a}});  // Nobody copies task 1's: nothing kept.
  copier.join();
  EXPECT_EQ(*w.WaitForRoom(0, 5), -1);  // The copier took it: the room is free.

  // A failed task stops every wait.
  w.StartIteration();
  w.Publish(0, 0, {{a}});
  std::thread stopper([&] { w.Stop(); });
  absl::StatusOr<int> room = w.WaitForRoom(0, 0);  // Published, not taken: waits.
  stopper.join();
  EXPECT_TRUE(absl::IsCancelled(room.status())) << room.status();
  EXPECT_TRUE(absl::IsCancelled(w.Take(0).status()));
  w.StartIteration();
  EXPECT_EQ(*w.WaitForRoom(0, 0), -1);
}

TEST(PeerWeightsTest, ACopyFromADeviceWithoutThatPackIsRefused) {
  TaskGraph g = TwoDevices(/*copy_from_device=*/1);  // From itself.
  auto p = PeerWeights::Create(g, 2);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("task 1 copies its weights from device 1"),
            std::string::npos)
      << p.status();
}

}  // namespace
}  // namespace harmony::executor
