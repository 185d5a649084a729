#include "zoo/zoo.h"

#include <string>

#include <torch/script.h>

#include "common/tensor_file.h"
#include "gtest/gtest.h"
#include "zoo/reference_training.h"

namespace harmony::zoo {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

ZooOptions Small(const std::string& family) {
  ZooOptions o;
  o.family = family;
  o.depth = 2;
  o.width = 16;
  o.heads = 2;
  o.vocab = 32;
  o.seq_len = 8;
  o.dropout = 0.1;
  o.classes = 4;
  o.image_size = 8;
  o.input_dim = 12;
  o.samples = 16;
  o.seed = 7;
  return o;
}

class ZooFamilyTest : public ::testing::TestWithParam<std::string> {};

// The contract: every family is written, loads with torch::jit::load,
// trains a few SGD steps, and the loss decreases.
TEST_P(ZooFamilyTest, WritesLoadsAndTrains) {
  torch::manual_seed(0);  // Dropout masks.
  ZooOptions o = Small(GetParam());
  std::string model_path = TempPath(GetParam() + ".pt");
  std::string data_path = TempPath(GetParam() + "_data.pt");
  absl::Status written = WriteZooModelAndData(o, model_path, data_path);
  ASSERT_TRUE(written.ok()) << written;

  torch::jit::Module model = torch::jit::load(model_path);
  absl::StatusOr<common::TrainingData> data = common::LoadTrainingData(data_path);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->size(), o.samples);
  ASSERT_EQ(data->targets.size(), 1u);

  ReferenceTrainingOptions train;
  train.steps = 8;
  train.learning_rate = 0.05;
  absl::StatusOr<std::vector<double>> losses = TrainReference(model, *data, train);
  ASSERT_TRUE(losses.ok()) << losses.status();
  ASSERT_EQ(losses->size(), 8u);
  for (double l : *losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(losses->back(), losses->front())
      << GetParam() << ": loss went from " << losses->front() << " to "
      << losses->back();
}

TEST_P(ZooFamilyTest, SameSeedSameModelAndData) {
  ZooOptions o = Small(GetParam());
  auto a = BuildZooModel(o);
  auto b = BuildZooModel(o);
  ASSERT_TRUE(a.ok() && b.ok());
  auto pa = a->named_parameters();
  auto pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  auto ib = pb.begin();
  for (auto ia = pa.begin(); ia != pa.end(); ++ia, ++ib) {
    EXPECT_EQ((*ia).name, (*ib).name);
    EXPECT_TRUE(torch::equal((*ia).value, (*ib).value)) << (*ia).name;
  }
  auto da = MakeZooData(o);
  auto db = MakeZooData(o);
  ASSERT_TRUE(da.ok() && db.ok());
  EXPECT_TRUE(torch::equal(da->inputs[0], db->inputs[0]));

  o.seed = 8;
  auto c = BuildZooModel(o);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(torch::equal((*c->parameters().begin()),
                            (*a->parameters().begin())));
}

INSTANTIATE_TEST_SUITE_P(AllFamilies, ZooFamilyTest,
                         ::testing::Values("mlp", "gpt", "bert", "resnet",
                                           "vgg"),
                         [](const auto& info) { return info.param; });

TEST(ZooTest, GptIsATransformerLmReturningItsLoss) {
  ZooOptions o = Small("gpt");
  o.depth = 3;
  auto model = BuildZooModel(o);
  ASSERT_TRUE(model.ok()) << model.status();
  // Blocks live in a ModuleList "h" and share one class, as in
  // torch.jit.script output.
  torch::jit::Module h = model->attr("h").toModule();
  EXPECT_NE(h.type()->name()->qualifiedName().find("ModuleList"),
            std::string::npos);
  ASSERT_EQ(h.named_children().size(), 3u);
  EXPECT_EQ(h.attr("0").toModule().type(), h.attr("2").toModule().type());
  // forward(tokens, targets) returns a scalar loss.
  auto data = MakeZooData(o);
  ASSERT_TRUE(data.ok());
  c10::IValue loss = model->forward({data->inputs[0], data->targets[0]});
  ASSERT_TRUE(loss.isTensor());
  EXPECT_EQ(loss.toTensor().dim(), 0);
  // Near log(vocab) at initialisation.
  EXPECT_NEAR(loss.toTensor().item<double>(), std::log(32.0), 1.5);
}

TEST(ZooTest, BertMasksPaddingAndReturnsLogits) {
  ZooOptions o = Small("bert");
  auto model = BuildZooModel(o);
  auto data = MakeZooData(o);
  ASSERT_TRUE(model.ok() && data.ok());
  // The data has padding (token 0) that the attention mask hides.
  EXPECT_GT((data->inputs[0] == 0).sum().item<int64_t>(), 0);
  model->eval();
  at::Tensor logits = model->forward({data->inputs[0]}).toTensor();
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{16, 4}));
  // Changing a padded token's value does not change the logits.
  at::Tensor tokens = data->inputs[0].clone();
  at::Tensor pad = (tokens == 0).nonzero();
  ASSERT_GT(pad.size(0), 0);
  const int64_t row = pad[0][0].item<int64_t>();
  const int64_t col = pad[0][1].item<int64_t>();
  at::Tensor changed = tokens.clone();
  changed[row][col] = 5;  // No longer padding: the mask changes too.
  at::Tensor masked_out = model->forward({tokens}).toTensor();
  EXPECT_TRUE(torch::allclose(masked_out, logits));
  EXPECT_FALSE(torch::allclose(model->forward({changed}).toTensor()[row],
                               logits[row]));
}

TEST(ZooTest, ResnetUpdatesBatchNormStatisticsInTraining) {
  ZooOptions o = Small("resnet");
  auto model = BuildZooModel(o);
  auto data = MakeZooData(o);
  ASSERT_TRUE(model.ok() && data.ok());
  at::Tensor before = model->attr("bn1").toModule().attr("running_mean").toTensor().clone();
  model->forward({data->inputs[0]});
  torch::jit::Module bn1 = model->attr("bn1").toModule();
  EXPECT_FALSE(torch::equal(bn1.attr("running_mean").toTensor(), before));
  EXPECT_EQ(bn1.attr("num_batches_tracked").toTensor().item<int64_t>(), 1);
  // The first block of stages 2 and 3 downsamples.
  EXPECT_TRUE(model->attr("layer2").toModule().attr("0").toModule().hasattr(
      "downsample"));
}

TEST(ZooTest, BadOptionsNameTheFlag) {
  ZooOptions o = Small("gpt");
  o.width = 15;  // Not divisible by 2 heads.
  absl::Status status = ValidateZooOptions(o);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--width"), absl::string_view::npos) << status;

  o = Small("transformer");
  status = BuildZooModel(o).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("mlp, gpt, bert, resnet, vgg"),
            absl::string_view::npos)
      << status;

  o = Small("vgg");
  o.image_size = 12;
  EXPECT_NE(ValidateZooOptions(o).message().find("--image-size"),
            absl::string_view::npos);
  o = Small("mlp");
  o.dropout = 1.0;
  EXPECT_NE(ValidateZooOptions(o).message().find("--dropout"),
            absl::string_view::npos);
}

// Microbatches whose losses are scaled by their share of the minibatch give
// the whole minibatch's loss and step (to rounding) on a model without batch
// statistics or dropout, and each microbatch's gradients really count: a
// step over 4 microbatches moves the weights as one over the whole.
TEST(ReferenceTrainingTest, MicrobatchesAccumulateToTheMinibatchsStep) {
  ZooOptions o = Small("mlp");
  o.dropout = 0;
  auto whole = BuildZooModel(o);
  auto split = BuildZooModel(o);
  auto data = MakeZooData(o);
  ASSERT_TRUE(whole.ok() && split.ok() && data.ok());
  ReferenceTrainingOptions train;
  train.steps = 3;
  train.learning_rate = 0.5;
  train.minibatch = 8;
  absl::StatusOr<std::vector<double>> a = TrainReference(*whole, *data, train);
  train.microbatch = 2;
  absl::StatusOr<std::vector<double>> b = TrainReference(*split, *data, train);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < a->size(); ++i) EXPECT_NEAR((*a)[i], (*b)[i], 1e-5 * std::abs((*a)[i]));
  auto pa = whole->named_parameters();
  auto pb = split->named_parameters();
  for (auto ia = pa.begin(), ib = pb.begin(); ia != pa.end(); ++ia, ++ib) {
    const double scale = (*ia).value.norm().item<double>();
    EXPECT_LE(((*ia).value - (*ib).value).norm().item<double>(), 1e-5 * scale) << (*ia).name;
  }
}

TEST(ReferenceTrainingTest, WrongDataShapeIsExplained) {
  auto model = BuildZooModel(Small("gpt"));
  ASSERT_TRUE(model.ok());
  // GPT's forward takes tokens and targets; give it three inputs and a
  // target, which fits neither forward(inputs) nor forward(inputs, targets).
  absl::StatusOr<at::Tensor> loss =
      ComputeLoss(*model, {torch::zeros({2, 8}, torch::kInt64),
                           torch::zeros({2, 8}, torch::kInt64),
                           torch::zeros({2, 8}, torch::kInt64)},
                  {torch::zeros({2, 8}, torch::kInt64)}, LossKind::kAuto);
  ASSERT_FALSE(loss.ok());
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(loss.status().message().find("forward(tokens, targets) takes 2"),
            absl::string_view::npos)
      << loss.status();
}

}  // namespace
}  // namespace harmony::zoo
