// The weight-decay groups' rules and the clip mode's names.

#include "executor/runtime/recipe.h"

#include "gtest/gtest.h"

namespace harmony::executor {
namespace {

TEST(RecipeTest, AutoTakesEveryOneDimensionalParameter) {
  absl::StatusOr<NoDecayRule> r = ParseNoDecay("auto", false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->Matches("h.0.attn.c_attn.bias", 1, false));
  EXPECT_TRUE(r->Matches("ln_f.weight", 1, false));
  EXPECT_FALSE(r->Matches("h.0.attn.c_attn.weight", 2, false));
  EXPECT_FALSE(r->Matches("wte.weight", 2, true));  // Embeddings only when asked.
  absl::StatusOr<NoDecayRule> e = ParseNoDecay("auto", true);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->Matches("wte.weight", 2, true));
}

TEST(RecipeTest, PatternsMatchTheNameOrADottedTail) {
  absl::StatusOr<NoDecayRule> r = ParseNoDecay("ln_*, *.bias", false);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->Matches("h.0.ln_1.weight", 1, false));
  EXPECT_TRUE(r->Matches("ln_f.weight", 1, false));
  EXPECT_TRUE(r->Matches("h.3.mlp.c_fc.bias", 1, false));
  EXPECT_FALSE(r->Matches("h.0.mlp.c_fc.weight", 2, false));
  EXPECT_FALSE(r->Matches("h.0.mln_1.weight", 1, false));  // "ln_*" starts a component.
  EXPECT_EQ(r->ToString(), "ln_*, *.bias");
  EXPECT_FALSE(ParseNoDecay("auto,,x", false).ok());
  EXPECT_FALSE(ParseNoDecay("", false)->any());
}

TEST(RecipeTest, ClipModes) {
  EXPECT_EQ(*ParseClipMode("hold"), ClipMode::kHold);
  EXPECT_EQ(*ParseClipMode("speculate"), ClipMode::kSpeculate);
  EXPECT_EQ(*ParseClipMode("auto"), ClipMode::kAuto);
  absl::StatusOr<ClipMode> bad = ParseClipMode("spec");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--clip-mode"), std::string::npos);
}

}  // namespace
}  // namespace harmony::executor
