// harmony-plan end to end: profile a zoo model into a profile file, inspect
// its decomposition, synthesize a larger model's profile; bad input gives
// one clear line and a non-zero exit.

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "common/plan_file.h"
#include "common/units.h"
#include "planner/profile/profiler.h"
#include "tests/run_command.h"

namespace harmony {
namespace {

using testing::RunCommand;

const char kZoo[] = "zoo/harmony-zoo";
const char kPlan[] = "planner/harmony-plan";
const char kExec[] = "executor/harmony-exec";

std::string Tmp(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

// `harmony-plan simulate` on the saved plan at `path` prints its own
// estimated iteration time and device compute.
void ExpectResimulates(const std::string& path, const proto::Plan& plan) {
  auto simulated = RunCommand(absl::StrCat(kPlan, " simulate ", path));
  ASSERT_EQ(simulated.exit_code, 0) << simulated.output;
  EXPECT_NE(simulated.output.find(absl::StrCat(
                "iteration ", common::FormatTimeSpan(absl::Seconds(
                                  plan.estimates().iteration_time_s())))),
            std::string::npos)
      << simulated.output;
  // And the device compute harmony-exec compares its measurement with.
  EXPECT_NE(simulated.output.find(absl::StrCat(
                "device compute ",
                common::FormatTimeSpan(absl::Seconds(plan.estimates().compute_s())),
                " (summed over the devices)")),
            std::string::npos)
      << simulated.output;
}

TEST(PlanCliTest, ProfileDecomposeSynthesize) {
  ASSERT_EQ(RunCommand(absl::StrCat(kZoo, " gpt --depth 3 --width 16 --seq-len 8 "
                                          "--vocab 32 -o ", Tmp("gpt.pt"),
                                    " --data ", Tmp("gpt_data.pt")))
                .exit_code,
            0);
  auto profiled = RunCommand(absl::StrCat(
      kPlan, " profile ", Tmp("gpt.pt"), " --sample-input ", Tmp("gpt_data.pt"),
      " --devices cpu:2x64MiB --max-microbatch 4 --repeats 1 --profile-out ",
      Tmp("gpt.profile.json")));
  ASSERT_EQ(profiled.exit_code, 0) << profiled.output;
  EXPECT_NE(profiled.output.find("profiled " + Tmp("gpt.pt")), std::string::npos)
      << profiled.output;
  EXPECT_NE(profiled.output.find("fwd ms"), std::string::npos);
  // Progress lines (not a terminal: one per microbatch size).
  EXPECT_NE(profiled.output.find("profiling vLayer 1/"), std::string::npos);
  EXPECT_NE(profiled.output.find(", microbatch 4"), std::string::npos);

  absl::StatusOr<proto::ProfileFile> file =
      planner::ReadProfileFile(Tmp("gpt.profile.json"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->profile().max_backward_microbatch(), 4u);
  for (const auto& v : file->profile().vlayers()) {
    for (const auto& m : v.by_microbatch()) {
      EXPECT_LE(m.backward_peak_bytes(), 64ull << 20);
    }
  }

  auto decomposed = RunCommand(absl::StrCat(kPlan, " decompose ", Tmp("gpt.pt")));
  ASSERT_EQ(decomposed.exit_code, 0) << decomposed.output;
  EXPECT_NE(decomposed.output.find("forward(tokens, targets)"), std::string::npos);
  EXPECT_NE(decomposed.output.find("h.2"), std::string::npos) << decomposed.output;
  EXPECT_EQ(decomposed.output.find("h.2.attn"), std::string::npos) << decomposed.output;
  auto split = RunCommand(absl::StrCat(kPlan, " decompose ", Tmp("gpt.pt"), " --split-blocks"));
  ASSERT_EQ(split.exit_code, 0) << split.output;
  for (const char* part : {"h.2.ln_1", "h.2.attn", "h.2.ln_2", "h.2.mlp"}) {
    EXPECT_NE(split.output.find(part), std::string::npos) << part << " in " << split.output;
  }

  int block = -1;
  const auto& vlayers = file->model().decomposition().vlayers();
  for (int k = 0; k < vlayers.size(); ++k) {
    if (vlayers[k].scope() == "h.0") block = k;
  }
  ASSERT_GE(block, 0);
  auto synthesized = RunCommand(absl::StrCat(
      kPlan, " synthesize --profile ", Tmp("gpt.profile.json"), " --block ", block,
      " --block-count 3 --blocks 48 --width-scale 4 --profile-out ",
      Tmp("big.json")));
  ASSERT_EQ(synthesized.exit_code, 0) << synthesized.output;
  auto big = planner::ReadProfileFile(Tmp("big.json"));
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->profile().vlayers_size(), vlayers.size() - 3 + 48);
}

// A model too large to profile: profile a smaller one with the same blocks,
// synthesize the large one's profile, and plan the large model from it; the
// plan carries the large model's identity, so harmony-exec trains it. A
// model the profile does not describe is refused, saying how it differs.
TEST(PlanCliTest, ASynthesizedProfilePlansTheModelItDescribes) {
  const std::string dims = " --width 16 --seq-len 8 --vocab 32 --samples 8 --dropout 0";
  auto zoo = [&](const std::string& name, const std::string& flags) {
    return RunCommand(absl::StrCat(kZoo, " gpt", dims, " ", flags, " -o ", Tmp(name + ".pt"),
                                   " --data ", Tmp(name + "_data.pt")))
        .exit_code;
  };
  ASSERT_EQ(zoo("syn_small", "--depth 2"), 0);
  ASSERT_EQ(zoo("syn_big", "--depth 5"), 0);
  auto profiled = RunCommand(absl::StrCat(
      kPlan, " profile ", Tmp("syn_small.pt"), " --sample-input ", Tmp("syn_small_data.pt"),
      " --devices cpu:2x64MiB --max-microbatch 4 --repeats 1 --profile-out ",
      Tmp("syn_small.json")));
  ASSERT_EQ(profiled.exit_code, 0) << profiled.output;
  // vLayers: wte, wpe, h.0, h.1, ln_f, lm_head.
  auto synthesized = RunCommand(absl::StrCat(
      kPlan, " synthesize --profile ", Tmp("syn_small.json"),
      " --block 2 --block-count 2 --blocks 5 --profile-out ", Tmp("syn_big.json")));
  ASSERT_EQ(synthesized.exit_code, 0) << synthesized.output;

  auto plan = [&](const std::string& model) {
    return RunCommand(absl::StrCat(kPlan, " ", Tmp(model + ".pt"), " --profile ",
                                   Tmp("syn_big.json"), " --gpus 2 --device-memory 64MiB "
                                   "--minibatch 8 -o ", Tmp(model + ".pb")));
  };
  auto planned = plan("syn_big");
  ASSERT_EQ(planned.exit_code, 0) << planned.output;
  absl::StatusOr<proto::Plan> read = common::ReadPlanFile(Tmp("syn_big.pb"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->model().sha256(), *common::Sha256OfFile(Tmp("syn_big.pt")));
  EXPECT_EQ(read->model().file_name(), "syn_big.pt");
  EXPECT_EQ(read->model().decomposition().vlayer_count(), 9u);
  ASSERT_EQ(read->model().decomposition().vlayers_size(), 9);
  EXPECT_EQ(read->model().decomposition().vlayers(6).scope(), "h.4");
  EXPECT_EQ(read->model().decomposition().cut_points_size(), 9);
  EXPECT_TRUE(read->profile().synthesized());
  auto trained = RunCommand(absl::StrCat(
      kExec, " run ", Tmp("syn_big.pb"), " --model ", Tmp("syn_big.pt"), " --data ",
      Tmp("syn_big_data.pt"), " --iterations 2 --devices cpu:2x64MiB"));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("trained 2 iterations"), std::string::npos) << trained.output;

  ASSERT_EQ(zoo("syn_short", "--depth 4"), 0);
  auto shorter = plan("syn_short");
  EXPECT_NE(shorter.exit_code, 0);
  EXPECT_NE(shorter.output.find("splits into 8 vLayers, the synthesized profile has 9"),
            std::string::npos)
      << shorter.output;
  ASSERT_EQ(RunCommand(absl::StrCat(kZoo, " gpt --depth 5 --width 32 --seq-len 8 --vocab 32 "
                                    "--samples 8 -o ", Tmp("syn_wide.pt"), " --data ",
                                    Tmp("syn_wide_data.pt")))
                .exit_code,
            0);
  auto wider = plan("syn_wide");
  EXPECT_NE(wider.exit_code, 0);
  EXPECT_NE(wider.output.find("vLayer 0 (wte) holds 4.00 KiB of parameters, the synthesized "
                              "profile's 2.00 KiB"),
            std::string::npos)
      << wider.output;
}

TEST(PlanCliTest, PlanIsValidReadableAndByteIdenticalOnRerun) {
  ASSERT_EQ(RunCommand(absl::StrCat(kZoo, " gpt --depth 4 --width 32 --seq-len 16 "
                                          "--vocab 64 -o ", Tmp("p.pt"), " --data ",
                                    Tmp("p_data.pt")))
                .exit_code,
            0);
  // Profile once, then plan twice from the profile; devices too small for
  // the whole model force swapping.
  auto profiled = RunCommand(absl::StrCat(
      kPlan, " profile ", Tmp("p.pt"), " --sample-input ", Tmp("p_data.pt"),
      " --devices cpu:2x64MiB --max-microbatch 8 --repeats 1 --profile-out ",
      Tmp("p.json")));
  ASSERT_EQ(profiled.exit_code, 0) << profiled.output;
  const std::string plan = absl::StrCat(
      kPlan, " ", Tmp("p.pt"), " --profile ", Tmp("p.json"),
      " --gpus 2 --device-memory 400KiB --minibatch 16 --trace ", Tmp("t.json"), " -o ");
  auto first = RunCommand(plan + Tmp("a.pb") + " --json " + Tmp("a.json"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("searched "), std::string::npos) << first.output;
  EXPECT_NE(first.output.find("on-demand swapping would move"), std::string::npos);
  auto second = RunCommand(plan + Tmp("b.pb"));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(*common::ReadFileToString(Tmp("a.pb")), *common::ReadFileToString(Tmp("b.pb")));

  absl::StatusOr<proto::Plan> read = common::ReadPlanFile(Tmp("a.pb"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->model().sha256(), *common::Sha256OfFile(Tmp("p.pt")));
  EXPECT_EQ(read->config().num_devices(), 2u);
  EXPECT_GT(read->devices(0).tasks_size(), 0);
  for (uint64_t peak : read->estimates().device_peak_bytes()) EXPECT_LE(peak, 400u * 1024);
  EXPECT_TRUE(common::ReadPlanFile(Tmp("a.json")).ok());
  EXPECT_GT(common::ReadFileToString(Tmp("t.json"))->size(), 100u);

  auto inspected = RunCommand(absl::StrCat(kPlan, " inspect ", Tmp("a.pb"), " --tasks"));
  ASSERT_EQ(inspected.exit_code, 0) << inspected.output;
  EXPECT_NE(inspected.output.find("device 0:"), std::string::npos);
  EXPECT_NE(inspected.output.find("WEIGHTS_IN"), std::string::npos) << inspected.output;
  // The host's updates list what they wait for, with no dangling colon.
  EXPECT_NE(inspected.output.find("UPDATE   pack 0   vLayers 0-"), std::string::npos)
      << inspected.output;
  EXPECT_NE(inspected.output.find(", after t"), std::string::npos) << inspected.output;
  EXPECT_EQ(inspected.output.find(": \n"), std::string::npos) << inspected.output;
  EXPECT_EQ(inspected.output.find("0 microbatch(es)"), std::string::npos) << inspected.output;

  // Re-simulating the saved plan reproduces its estimates exactly.
  auto simulated = RunCommand(absl::StrCat(kPlan, " simulate ", Tmp("a.pb")));
  ASSERT_EQ(simulated.exit_code, 0) << simulated.output;
  const std::string expected_time = absl::StrCat(
      "iteration ", common::FormatTimeSpan(absl::Seconds(read->estimates().iteration_time_s())));
  EXPECT_NE(simulated.output.find(expected_time), std::string::npos)
      << simulated.output << " vs " << expected_time;

  EXPECT_NE(inspected.output.find("  precision: fp32\n"), std::string::npos) << inspected.output;
  EXPECT_EQ(read->config().precision(), proto::FP32);

  // Cut-choosing flags beside --profile (whose cuts are fixed): a usage
  // error that says how to profile at those cuts, nothing written.
  for (const std::string flag : {"--split-blocks", "--granularity 4"}) {
    auto ignored = RunCommand(absl::StrCat(kPlan, " ", Tmp("p.pt"), " --profile ", Tmp("p.json"),
                                           " --gpus 2 --device-memory 4MiB --minibatch 16 ", flag,
                                           " -o ", Tmp("cuts.pb")));
    EXPECT_EQ(ignored.exit_code, 2) << ignored.output;
    EXPECT_NE(ignored.output.find(flag + " chooses the cuts"), std::string::npos)
        << ignored.output;
    EXPECT_NE(ignored.output.find("harmony-plan profile ... " + flag), std::string::npos)
        << ignored.output;
    EXPECT_FALSE(std::filesystem::exists(Tmp("cuts.pb")));
  }

  // --keep-activations all: every pack that can keeps its forward's saved
  // activations; inspect says so per pack, and the saved plan re-simulates
  // to its own estimates.
  auto kept = RunCommand(absl::StrCat(kPlan, " ", Tmp("p.pt"), " --profile ", Tmp("p.json"),
                                      " --gpus 2 --device-memory 4MiB --minibatch 16 --mode vpp"
                                      " --packs 0-1,2-2,3-3,4-4,5-5,6-7 --keep-activations all -o ",
                                      Tmp("k.pb")));
  ASSERT_EQ(kept.exit_code, 0) << kept.output;
  absl::StatusOr<proto::Plan> kept_plan = common::ReadPlanFile(Tmp("k.pb"));
  ASSERT_TRUE(kept_plan.ok()) << kept_plan.status();
  EXPECT_GT(kept_plan->config().kept_packs_size(), 0) << kept.output;
  EXPECT_GT(kept_plan->estimates().swap().kept_out(), 0u);
  auto kept_inspected = RunCommand(absl::StrCat(kPlan, " inspect ", Tmp("k.pb"), " --tasks"));
  ASSERT_EQ(kept_inspected.exit_code, 0) << kept_inspected.output;
  EXPECT_NE(kept_inspected.output.find("activations per backward pack: "), std::string::npos)
      << kept_inspected.output;
  EXPECT_NE(kept_inspected.output.find(":keep"), std::string::npos) << kept_inspected.output;
  EXPECT_NE(kept_inspected.output.find("KEPT_OUT"), std::string::npos) << kept_inspected.output;
  ExpectResimulates(Tmp("k.pb"), *kept_plan);
  auto bad_keep = RunCommand(plan + Tmp("x.pb") + " --keep-activations sometimes");
  EXPECT_NE(bad_keep.exit_code, 0);
  EXPECT_NE(bad_keep.output.find("--keep-activations \"sometimes\": expected auto, all or none"),
            std::string::npos) << bad_keep.output;

  // --waves 2: a vDP plan in two passes over the packs; inspect says so,
  // the saved plan re-simulates to its own estimates; waves with vPP, or
  // fewer than one, are refused.
  auto waved = RunCommand(absl::StrCat(kPlan, " ", Tmp("p.pt"), " --profile ", Tmp("p.json"),
                                       " --gpus 2 --device-memory 4MiB --minibatch 16 --mode vdp"
                                       " --waves 2 -o ", Tmp("w.pb")));
  ASSERT_EQ(waved.exit_code, 0) << waved.output;
  absl::StatusOr<proto::Plan> waved_plan = common::ReadPlanFile(Tmp("w.pb"));
  ASSERT_TRUE(waved_plan.ok()) << waved_plan.status();
  EXPECT_EQ(waved_plan->config().waves(), 2u);
  EXPECT_NE(waved.output.find("waves: 2 passes of 8 samples"), std::string::npos)
      << waved.output;
  ExpectResimulates(Tmp("w.pb"), *waved_plan);
  auto waves_vpp = RunCommand(plan + Tmp("x.pb") + " --mode vpp --waves 2");
  EXPECT_NE(waves_vpp.exit_code, 0);
  EXPECT_NE(waves_vpp.output.find("not with --mode vpp"), std::string::npos) << waves_vpp.output;
  auto waves_negative = RunCommand(plan + Tmp("x.pb") + " --waves -1");
  EXPECT_NE(waves_negative.exit_code, 0);
  EXPECT_NE(waves_negative.output.find("--waves -1: expected 0"), std::string::npos)
      << waves_negative.output;

  // A bf16 plan: profiled in bf16, half the parameter bytes on the devices,
  // the fp32 masters' on the host; said by inspect. An fp32 profile asked
  // for bf16 is refused, naming both.
  auto bf16_profiled = RunCommand(absl::StrCat(
      kPlan, " profile ", Tmp("p.pt"), " --sample-input ", Tmp("p_data.pt"),
      " --devices cpu:2x64MiB --max-microbatch 8 --repeats 1 --precision bf16 --profile-out ",
      Tmp("p16.json")));
  ASSERT_EQ(bf16_profiled.exit_code, 0) << bf16_profiled.output;
  auto bf16_planned = RunCommand(absl::StrCat(kPlan, " ", Tmp("p.pt"), " --profile ",
                                              Tmp("p16.json"), " --gpus 2 --device-memory 400KiB "
                                              "--minibatch 16 -o ", Tmp("p16.pb")));
  ASSERT_EQ(bf16_planned.exit_code, 0) << bf16_planned.output;
  absl::StatusOr<proto::Plan> bf16 = common::ReadPlanFile(Tmp("p16.pb"));
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ(bf16->config().precision(), proto::BF16);
  EXPECT_EQ(bf16->profile().precision(), proto::BF16);
  for (int k = 0; k < bf16->profile().vlayers_size(); ++k) {
    const proto::VLayerProfile& v16 = bf16->profile().vlayers(k);
    const proto::VLayerProfile& v32 = read->profile().vlayers(k);
    EXPECT_EQ(2 * v16.parameter_bytes(), v32.parameter_bytes()) << "vLayer " << k;
    EXPECT_EQ(v16.host_parameter_bytes(), v32.parameter_bytes()) << "vLayer " << k;
    EXPECT_EQ(v16.optimizer_state_bytes(), v32.optimizer_state_bytes()) << "vLayer " << k;
  }
  auto bf16_inspected = RunCommand(absl::StrCat(kPlan, " inspect ", Tmp("p16.pb")));
  EXPECT_NE(bf16_inspected.output.find("  precision: bf16 ("), std::string::npos)
      << bf16_inspected.output;
  auto mismatch = RunCommand(absl::StrCat(kPlan, " ", Tmp("p.pt"), " --profile ", Tmp("p.json"),
                                          " --precision bf16 --gpus 2 --device-memory 400KiB "
                                          "--minibatch 16 -o ", Tmp("p16b.pb")));
  EXPECT_EQ(mismatch.exit_code, 1);
  EXPECT_NE(mismatch.output.find("was profiled in fp32, not --precision bf16"), std::string::npos)
      << mismatch.output;

  // A profile of another model is refused.
  ASSERT_TRUE(common::WriteFileAtomically(Tmp("other.pt"), "other").ok());
  auto other = RunCommand(absl::StrCat(kPlan, " ", Tmp("other.pt"), " --profile ",
                                       Tmp("p.json"), " --gpus 2 --device-memory 1GiB "
                                       "--minibatch 4 -o ", Tmp("c.pb")));
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.output.find("profiles another model"), std::string::npos) << other.output;
  // Too little memory names the vLayer and the cap.
  auto tiny = RunCommand(absl::StrCat(kPlan, " --profile ", Tmp("p.json"),
                                      " --gpus 2 --device-memory 1KiB --minibatch 4 -o ",
                                      Tmp("d.pb")));
  EXPECT_EQ(tiny.exit_code, 1);
  EXPECT_NE(tiny.output.find("alone needs"), std::string::npos) << tiny.output;
  // Activations kept on the devices, pinned: the plan says so, and a value
  // that is not auto, yes or no is named.
  auto local = RunCommand(absl::StrCat(plan, Tmp("l.pb"),
                                       " --mode vdp --packs 0-0,1-1,2-2,3-3,4-4,5-5,6-6,7-7 "
                                       "--local-activations yes"));
  ASSERT_EQ(local.exit_code, 0) << local.output;
  EXPECT_NE(local.output.find("activations between a device's packs stay on the device"),
            std::string::npos)
      << local.output;
  EXPECT_TRUE(common::ReadPlanFile(Tmp("l.pb"))->config().local_activations());
  auto bad_local = RunCommand(absl::StrCat(plan, Tmp("l2.pb"), " --local-activations maybe"));
  EXPECT_EQ(bad_local.exit_code, 1);
  EXPECT_NE(bad_local.output.find("--local-activations \"maybe\": expected auto, yes or no"),
            std::string::npos)
      << bad_local.output;
  // Weights copied from device 0, pinned yes and no: the plan says so and
  // swaps fewer bytes in from the host; a bad value is named. One pass
  // each (--waves 1): with waves every pass swaps the weights in again,
  // and which the search picks depends on the profile's timings (a CI
  // run's peer plan took 2 waves, 875 KiB of weights against 867 KiB).
  auto peer = RunCommand(absl::StrCat(plan, Tmp("pw.pb"), " --mode vdp --packs 0-0,1-1,2-2,3-3,4-4,5-5,6-6,7-7 --waves 1 --peer-weights yes"));
  ASSERT_EQ(peer.exit_code, 0) << peer.output;
  EXPECT_NE(peer.output.find("weights cross the host link once"), std::string::npos)
      << peer.output;
  auto own = RunCommand(absl::StrCat(plan, Tmp("pw2.pb"), " --mode vdp --packs 0-0,1-1,2-2,3-3,4-4,5-5,6-6,7-7 --waves 1 --peer-weights no"));
  ASSERT_EQ(own.exit_code, 0) << own.output;
  EXPECT_TRUE(common::ReadPlanFile(Tmp("pw.pb"))->config().peer_weights());
  EXPECT_FALSE(common::ReadPlanFile(Tmp("pw2.pb"))->config().peer_weights());
  EXPECT_LT(common::ReadPlanFile(Tmp("pw.pb"))->estimates().swap().weights_in(),
            common::ReadPlanFile(Tmp("pw2.pb"))->estimates().swap().weights_in());
  auto bad_peer = RunCommand(absl::StrCat(plan, Tmp("pw3.pb"), " --peer-weights often"));
  EXPECT_EQ(bad_peer.exit_code, 1);
  EXPECT_NE(bad_peer.output.find("--peer-weights \"often\": expected auto, yes or no"),
            std::string::npos)
      << bad_peer.output;
  // A fixed cost per host transfer: planned for (slower), or named when
  // it is not a duration.
  auto latency = RunCommand(absl::StrCat(plan, Tmp("lat.pb"), " --host-link-latency 2ms"));
  ASSERT_EQ(latency.exit_code, 0) << latency.output;
  EXPECT_GT(common::ReadPlanFile(Tmp("lat.pb"))->estimates().iteration_time_s(),
            read->estimates().iteration_time_s());
  // A plan made for another host link remembers it: re-simulated, it
  // reproduces its own estimate; another link is asked for by name.
  auto slow = RunCommand(absl::StrCat(plan, Tmp("slow.pb"),
                                      " --host-link 20MB/s --host-link-latency 2ms"));
  ASSERT_EQ(slow.exit_code, 0) << slow.output;
  absl::StatusOr<proto::Plan> slow_plan = common::ReadPlanFile(Tmp("slow.pb"));
  ASSERT_TRUE(slow_plan.ok()) << slow_plan.status();
  EXPECT_EQ(slow_plan->config().host_link_bytes_per_s(), 20e6);
  EXPECT_EQ(slow_plan->config().host_link_latency_s(), 2e-3);
  EXPECT_FALSE(read->config().has_host_link_latency_s());
  auto slow_sim = RunCommand(absl::StrCat(kPlan, " simulate ", Tmp("slow.pb")));
  ASSERT_EQ(slow_sim.exit_code, 0) << slow_sim.output;
  const std::string slow_time = absl::StrCat(
      "iteration ",
      common::FormatTimeSpan(absl::Seconds(slow_plan->estimates().iteration_time_s())));
  EXPECT_NE(slow_sim.output.find(slow_time), std::string::npos)
      << slow_sim.output << " vs " << slow_time;
  // inspect says which link the estimate is for.
  auto slow_inspect = RunCommand(absl::StrCat(kPlan, " inspect ", Tmp("slow.pb")));
  ASSERT_EQ(slow_inspect.exit_code, 0) << slow_inspect.output;
  EXPECT_NE(slow_inspect.output.find(absl::StrCat(
                "on a host link of ", common::FormatBandwidth(20e6),
                " per direction shared by the devices, ",
                common::FormatTimeSpan(absl::Milliseconds(2)), " per transfer (as harmony-plan")),
            std::string::npos)
      << slow_inspect.output;
  auto own_inspect = RunCommand(absl::StrCat(kPlan, " inspect ", Tmp("a.pb")));
  ASSERT_EQ(own_inspect.exit_code, 0) << own_inspect.output;
  EXPECT_NE(own_inspect.output.find("per transfer (the profile's measurement)"), std::string::npos)
      << own_inspect.output;
  auto fast_sim = RunCommand(absl::StrCat(kPlan, " simulate ", Tmp("slow.pb"),
                                          " --host-link 10GB/s --host-link-latency 0us"));
  ASSERT_EQ(fast_sim.exit_code, 0) << fast_sim.output;
  EXPECT_EQ(fast_sim.output.find(slow_time), std::string::npos) << fast_sim.output;
  // At another compute speed: says so, and a factor that is none is refused.
  auto scaled_sim = RunCommand(absl::StrCat(kPlan, " simulate ", Tmp("slow.pb"),
                                            " --host-link 10GB/s --host-link-latency 0us "
                                            "--compute-scale 3"));
  ASSERT_EQ(scaled_sim.exit_code, 0) << scaled_sim.output;
  const size_t at = fast_sim.output.find("iteration ");
  ASSERT_NE(at, std::string::npos) << fast_sim.output;
  const std::string fast_time = fast_sim.output.substr(at, fast_sim.output.find(" (", at) - at);
  EXPECT_EQ(scaled_sim.output.find(fast_time), std::string::npos)
      << scaled_sim.output << " vs " << fast_time;
  EXPECT_NE(scaled_sim.output.find("compute 3.00x the profile's"), std::string::npos)
      << scaled_sim.output;
  auto bad_scale =
      RunCommand(absl::StrCat(kPlan, " simulate ", Tmp("slow.pb"), " --compute-scale=-1"));
  EXPECT_EQ(bad_scale.exit_code, 1) << bad_scale.output;
  EXPECT_NE(bad_scale.output.find("compute scale -1: a positive factor"), std::string::npos)
      << bad_scale.output;
  // With the vLayers profiled again at the plan's sizes (as right before a
  // run): the times taken are said, and a profile of another model refused.
  const proto::Configuration& sizes = read->config();
  auto again = RunCommand(absl::StrCat(
      kPlan, " profile ", Tmp("p.pt"), " --sample-input ", Tmp("p_data.pt"),
      " --devices cpu:2x64MiB --repeats 1 --microbatches ", sizes.forward_microbatch(), ",",
      sizes.backward_microbatch(), " --profile-out ", Tmp("again.json")));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  auto retimed = RunCommand(absl::StrCat(kPlan, " simulate ", Tmp("a.pb"), " --times-from ",
                                         Tmp("again.json")));
  ASSERT_EQ(retimed.exit_code, 0) << retimed.output;
  EXPECT_NE(retimed.output.find(absl::StrCat("vLayer times from ", Tmp("again.json"), ": ")),
            std::string::npos)
      << retimed.output;
  EXPECT_NE(retimed.output.find(" rows taken, "), std::string::npos) << retimed.output;
  std::string other_json = *common::ReadFileToString(Tmp("again.json"));
  const std::string sha = read->model().sha256();
  ASSERT_NE(other_json.find(sha), std::string::npos);
  other_json.replace(other_json.find(sha), sha.size(), std::string(sha.size(), '0'));
  ASSERT_TRUE(common::WriteFileAtomically(Tmp("other.json"), other_json).ok());
  auto other_times = RunCommand(absl::StrCat(kPlan, " simulate ", Tmp("a.pb"), " --times-from ",
                                             Tmp("other.json")));
  EXPECT_EQ(other_times.exit_code, 1) << other_times.output;
  EXPECT_NE(other_times.output.find("a profile of another model"), std::string::npos)
      << other_times.output;
  auto bad_sizes = RunCommand(absl::StrCat(kPlan, " profile ", Tmp("p.pt"), " --sample-input ",
                                           Tmp("p_data.pt"), " --microbatches 4,many"));
  EXPECT_EQ(bad_sizes.exit_code, 1) << bad_sizes.output;
  EXPECT_NE(bad_sizes.output.find("\"many\" is not a size"), std::string::npos)
      << bad_sizes.output;
  auto bad_latency = RunCommand(absl::StrCat(plan, Tmp("lat2.pb"), " --host-link-latency soon"));
  EXPECT_EQ(bad_latency.exit_code, 1);
  EXPECT_NE(bad_latency.output.find("soon"), std::string::npos) << bad_latency.output;
  // --minibatch missing.
  auto missing = RunCommand(absl::StrCat(kPlan, " --profile ", Tmp("p.json"),
                                         " --gpus 2 --device-memory 1GiB -o ", Tmp("e.pb")));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("--minibatch is required"), std::string::npos);
}

TEST(PlanCliTest, PythonScriptedModelWithTupleFreeSample) {
  // A model saved by Python's torch.jit.script, data saved by torch.save.
  auto r = RunCommand(absl::StrCat(
      kPlan, " profile tests/testdata/user_bert.pt --sample-input "
             "tests/testdata/user_bert_data.pt --devices cpu:1x32MiB "
             "--max-microbatch 2 --repeats 1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("encoder.layers.1"), std::string::npos) << r.output;
}

// A model with one huge Linear (4 MiB of weights) on devices of 2 MiB:
// harmony-plan names the layer and its bytes and computes the smallest
// device memory that plans, which then plans, and 3% less does not.
TEST(PlanCliTest, NothingFitsSaysWhichLayerAndWhatMemoryPlans) {
  ASSERT_EQ(RunCommand(absl::StrCat(kZoo, " mlp --depth 3 --width 1024 --input-dim 16 "
                                          "--samples 16 -o ", Tmp("wide.pt"), " --data ",
                                    Tmp("wide_data.pt")))
                .exit_code,
            0);
  const std::string plan = absl::StrCat(kPlan, " ", Tmp("wide.pt"), " --sample-input ",
                                        Tmp("wide_data.pt"), " --gpus 2 --minibatch 16 -o ",
                                        Tmp("wide.pb"), " --device-memory ");
  auto r = RunCommand(plan + "2MiB");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("vLayer 1 (layers.1)'s forward needs more than the 2.00 MiB"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("nothing fits 2 device(s) of 2.00 MiB (10% kept free"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("vLayer 1 (layers.1, ops "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(weights 4.00 MiB, gradients 4.00 MiB, activations "),
            std::string::npos)
      << r.output;
  const std::string key = "the smallest --device-memory that plans is ";
  const size_t at = r.output.find(key);
  ASSERT_NE(at, std::string::npos) << r.output;
  std::string text = r.output.substr(at + key.size());
  text = text.substr(0, text.find('\n'));
  text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
  absl::StatusOr<uint64_t> smallest = common::ParseBytes(text);
  ASSERT_TRUE(smallest.ok()) << text;
  EXPECT_GT(*smallest, uint64_t{8} << 20);  // Weights and gradients at least.
  r = RunCommand(absl::StrCat(plan, *smallest, "B --microbatch 1"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(absl::StrCat(plan, *smallest * 97 / 100, "B --microbatch 1"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("nothing fits"), std::string::npos) << r.output;
}

// torchvision's resnet18 on 32x32 images cannot train on one sample (its
// last BatchNorm sees 1x1 maps: "Expected more than 1 value per channel").
// When nothing fits, the smallest microbatch that runs is measured without
// the cap to say what would: 2 here, where microbatch 1 failed before.
TEST(PlanCliTest, AModelThatNeedsTwoSamplesStillSaysWhatFits) {
  auto r = RunCommand(absl::StrCat(kPlan, " tests/suite/resnet18.pt --sample-input "
                                   "tests/suite/resnet18_data.pt --gpus 2 --minibatch 16 "
                                   "--device-memory 256KiB -o ", Tmp("r18.pb")));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("microbatch 1 does not run ("), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("harmony-plan: forward("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("for its backward at microbatch 2 (weights "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("the smallest --device-memory that plans is "), std::string::npos)
      << r.output;
}

TEST(PlanCliTest, BadInputIsOneClearLine) {
  ASSERT_TRUE(common::WriteFileAtomically(Tmp("junk.pt"), "junk").ok());
  auto r = RunCommand(absl::StrCat(kPlan, " profile ", Tmp("junk.pt"),
                                   " --sample-input tests/testdata/user_bert_data.pt"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(Tmp("junk.pt") + ": not a TorchScript model"),
            std::string::npos)
      << r.output;

  r = RunCommand(absl::StrCat(kPlan, " profile tests/testdata/user_bert.pt "
                                     "--sample-input tests/testdata/user_bert_data.pt "
                                     "--devices gpu:2"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("invalid devices \"gpu:2\""), std::string::npos) << r.output;

  r = RunCommand(absl::StrCat(kPlan, " profile tests/testdata/user_bert.pt "
                                     "--sample-input ", Tmp("missing.pt")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(Tmp("missing.pt")), std::string::npos) << r.output;

  // A bad search flag is reported before the model is profiled (minutes on
  // a large one), not after.
  const std::pair<std::string, std::string> bad_flags[] = {
      {" --mode diagonal", "--mode \"diagonal\": expected auto, vpp or vdp"},
      {" --schedule zero", "--schedule \"zero\": expected harmony, ondemand"},
      {" --packs 3-1", "--packs \"3-1\": expected vLayer ranges"},
      {" --host-link fast", "--host-link: invalid bandwidth \"fast\""},
      {" --host-link-latency soon", "--host-link-latency: "},
      {" --servers 2 --network slow", "--network: invalid bandwidth \"slow\""},
  };
  for (const auto& [bad, says] : bad_flags) {
    r = RunCommand(absl::StrCat(kPlan, " tests/testdata/user_bert.pt "
                                       "--sample-input tests/testdata/user_bert_data.pt "
                                       "--gpus 2 --device-memory 64MiB --minibatch 4 -o ",
                                Tmp("never.pb"), bad));
    EXPECT_EQ(r.exit_code, 1) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("harmony-plan: " + says), std::string::npos) << bad << ": " << r.output;
    EXPECT_EQ(r.output.find("profiling vLayer"), std::string::npos) << bad << ": " << r.output;
    EXPECT_FALSE(common::ReadFileToString(Tmp("never.pb")).ok()) << bad;
  }

  r = RunCommand(absl::StrCat(kPlan, " frobnicate"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("Commands: inspect, simulate, profile, decompose, synthesize"),
            std::string::npos);

  r = RunCommand(absl::StrCat(kPlan, " profile --help"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("--sample-input"), std::string::npos);
}

}  // namespace
}  // namespace harmony
