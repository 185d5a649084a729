// What the decomposer folds before it chooses cuts (common/pure_graph.cc,
// FoldConstants), and the check that a plan's recorded decomposition is the
// one its cut points make (common/decomposition_record.h).

#include <string>
#include <vector>

#include <torch/script.h>

#include "absl/strings/str_cat.h"
#include "common/decomposer.h"
#include "common/decomposition_record.h"
#include "gtest/gtest.h"

namespace harmony::common {
namespace {

std::unique_ptr<Decomposition> Decompose(torch::jit::Module& m, const std::string& output,
                                         int granularity = 0) {
  DecomposeOptions options;
  options.granularity = granularity;
  options.output = output;
  absl::StatusOr<std::unique_ptr<Decomposition>> d = Decomposition::Create(m, options);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *std::move(d) : nullptr;
}

// torchvision's IntermediateLayerGetter fills a dict under `if name in
// self.return_layers:` after each child, and DeepLabV3 reads "aux" from it
// after the classifier: folded, each backbone block and the heads are
// vLayers of their own (before, everything after the first block was one).
TEST(DecomposerFoldTest, IntermediateLayerGetterIsCutPerBlock) {
  torch::jit::Module m = torch::jit::load("tests/suite/deeplab.pt");
  m.train();
  std::unique_ptr<Decomposition> d = Decompose(m, "out");
  ASSERT_NE(d, nullptr);
  std::vector<std::string> scopes;
  for (const VLayerInfo& v : d->vlayers()) scopes.push_back(v.scope);
  int blocks = 0;
  for (const std::string& s : scopes) blocks += s.rfind("backbone.", 0) == 0;
  EXPECT_GE(blocks, 8) << ::testing::PrintToString(scopes);
  EXPECT_EQ(scopes.back(), "aux_classifier") << ::testing::PrintToString(scopes);
  for (const VLayerInfo& v : d->vlayers()) {
    for (const ValueSource& s : v.inputs) {
      EXPECT_GE(s.producer, -1) << "vLayer " << v.index;
    }
  }
}

// `self.training` is not folded: the model in eval mode, cut where the
// training graph was, has the same nodes in every vLayer (the evaluator
// relies on it).
TEST(DecomposerFoldTest, EvalModeDecomposesAtTheSameNodes) {
  for (const std::string name : {"deeplab", "resnet18", "transformer_cls", "efficientnet_b0"}) {
    SCOPED_TRACE(name);
    torch::jit::Module m = torch::jit::load("tests/suite/" + name + ".pt");
    m.train();
    DecomposeOptions options;
    options.granularity = 12;
    if (name == "deeplab") options.output = "out";
    absl::StatusOr<std::unique_ptr<Decomposition>> train = Decomposition::Create(m, options);
    ASSERT_TRUE(train.ok()) << train.status();
    m.eval();
    absl::StatusOr<std::unique_ptr<Decomposition>> eval =
        Decomposition::CreateWithCuts(m, (*train)->cut_points(), options.output);
    ASSERT_TRUE(eval.ok()) << eval.status();
    ASSERT_EQ((*eval)->num_vlayers(), (*train)->num_vlayers());
    for (int k = 0; k < (*train)->num_vlayers(); ++k) {
      EXPECT_EQ((*eval)->vlayers()[k].node_begin, (*train)->vlayers()[k].node_begin) << k;
      EXPECT_EQ((*eval)->vlayers()[k].node_end, (*train)->vlayers()[k].node_end) << k;
      EXPECT_EQ((*eval)->vlayers()[k].parameters, (*train)->vlayers()[k].parameters) << k;
    }
  }
}

TEST(DecompositionRecordTest, APlanFromAnotherNumberingIsRefused) {
  torch::jit::Module m = torch::jit::load("tests/suite/resnet18.pt");
  m.train();
  std::unique_ptr<Decomposition> d = Decompose(m, "", 8);
  ASSERT_NE(d, nullptr);
  ASSERT_GE(d->num_vlayers(), 4);
  const proto::Decomposition own = RecordDecomposition(*d, 8);
  EXPECT_TRUE(CheckDecompositionRecord(*d, own).ok());
  EXPECT_TRUE(CheckDecompositionRecord(*d, proto::Decomposition()).ok())
      << "a record without vLayers is not checked";

  proto::Decomposition shifted = own;
  shifted.mutable_vlayers(2)->set_node_end(own.vlayers(2).node_end() + 3);
  shifted.mutable_vlayers(3)->set_node_begin(own.vlayers(3).node_begin() + 3);
  absl::Status s = CheckDecompositionRecord(*d, shifted);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("vLayer 2"), std::string::npos) << s;
  EXPECT_NE(s.message().find("Plan again"), std::string::npos) << s;

  proto::Decomposition renamed = own;
  renamed.mutable_vlayers(1)->add_parameters("not.a.parameter");
  s = CheckDecompositionRecord(*d, renamed);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("vLayer 1"), std::string::npos) << s;

  proto::Decomposition fewer = own;
  fewer.mutable_vlayers()->RemoveLast();
  s = CheckDecompositionRecord(*d, fewer);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find(absl::StrCat(d->num_vlayers() - 1, " vLayers")),
            std::string::npos) << s;
}

}  // namespace
}  // namespace harmony::common
