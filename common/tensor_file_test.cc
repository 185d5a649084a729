#include "common/tensor_file.h"

#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/script.h>

#include "common/files.h"
#include "common/loss.h"
#include "gtest/gtest.h"

namespace harmony::common {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

TEST(TensorFileTest, TrainingDataRoundTrip) {
  TrainingData data;
  data.inputs = {torch::randn({5, 3}), torch::randint(0, 9, {5, 7})};
  data.targets = {torch::randint(0, 4, {5})};
  std::string path = TempPath("data.pt");
  ASSERT_TRUE(SaveTrainingData(path, data).ok());
  absl::StatusOr<TrainingData> back = LoadTrainingData(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->inputs.size(), 2u);
  ASSERT_EQ(back->targets.size(), 1u);
  EXPECT_TRUE(torch::equal(back->inputs[0], data.inputs[0]));
  EXPECT_TRUE(torch::equal(back->inputs[1], data.inputs[1]));
  EXPECT_TRUE(torch::equal(back->targets[0], data.targets[0]));
  EXPECT_EQ(back->size(), 5);
}

// SaveTensorFile writes record by record what pickle_save builds in memory:
// the same bytes (what torch.load reads), views of one storage stored once.
TEST(TensorFileTest, SavedAsPickleSaveMakesIt) {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  const at::Tensor flat = torch::randn({64});
  c10::Dict<std::string, at::Tensor> tensors;
  tensors.insert("w", flat.narrow(0, 0, 48).view({6, 8}));
  tensors.insert("b", flat.narrow(0, 48, 16));
  tensors.insert("ids", torch::randint(0, 9, {5}, torch::kLong));
  d.insert("tensors", tensors);
  d.insert("name", std::string("a checkpoint"));
  d.insert("iteration", int64_t{40});
  c10::List<std::string> metrics;
  metrics.push_back("{\"loss\": 2.5}");
  d.insert("metrics", metrics);
  const c10::IValue value(d);
  const std::string path = TempPath("pickled.pt");
  ASSERT_TRUE(SaveTensorFile(path, value).ok());
  const std::vector<char> expected = torch::jit::pickle_save(value);
  absl::StatusOr<std::string> written = ReadFileToString(path);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, std::string(expected.begin(), expected.end()));
  absl::StatusOr<c10::IValue> back = LoadTensorFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  const auto back_tensors =
      back->toGenericDict().at(c10::IValue(std::string("tensors"))).toGenericDict();
  const at::Tensor w = back_tensors.at(c10::IValue(std::string("w"))).toTensor();
  const at::Tensor b = back_tensors.at(c10::IValue(std::string("b"))).toTensor();
  EXPECT_TRUE(torch::equal(w, flat.narrow(0, 0, 48).view({6, 8})));
  EXPECT_TRUE(torch::equal(b, flat.narrow(0, 48, 16)));
  EXPECT_TRUE(w.is_alias_of(b));  // One storage, as saved.
  // The same from the bytes in memory.
  absl::StatusOr<c10::IValue> parsed = ParseTensorFile(*written, "the bytes");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto parsed_tensors =
      parsed->toGenericDict().at(c10::IValue(std::string("tensors"))).toGenericDict();
  EXPECT_TRUE(torch::equal(parsed_tensors.at(c10::IValue(std::string("w"))).toTensor(), w));
  EXPECT_EQ(parsed->toGenericDict().at(c10::IValue(std::string("iteration"))).toInt(), 40);
  absl::StatusOr<c10::IValue> cut =
      ParseTensorFile(written->substr(0, written->size() / 2), "half");
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument) << cut.status();
  EXPECT_EQ(LoadTensorFile(::testing::TempDir()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A module saved to two paths is the same bytes (what a daemon's fetch
// compares), and torch.jit.load opens it.
TEST(TensorFileTest, ScriptModulesSavedAlikeWhateverThePath) {
  torch::jit::Module m("Tiny");
  m.register_parameter("w", torch::randn({4, 3}), false);
  const std::string a = TempPath("model-a.pt"), b = TempPath("another-name.bin");
  ASSERT_TRUE(SaveScriptModule(m, a).ok());
  ASSERT_TRUE(SaveScriptModule(m, b).ok());
  EXPECT_EQ(*ReadFileToString(a), *ReadFileToString(b));
  torch::jit::Module back = torch::jit::load(a);
  EXPECT_TRUE(torch::equal(back.attr("w").toTensor(), m.attr("w").toTensor()));
  EXPECT_FALSE(SaveScriptModule(m, TempPath("no/such/dir/m.pt")).ok());
}

TEST(TensorFileTest, ReadsTrainingDataSavedByPython) {
  // tests/testdata/make_python_fixtures.py: torch.save({"inputs":
  // arange(24).reshape(4, 6) / 10, "targets": [0, 2, 1, 3]}).
  absl::StatusOr<TrainingData> data =
      LoadTrainingData("tests/testdata/python_training_data.pt");
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->inputs.size(), 1u);
  EXPECT_TRUE(torch::allclose(
      data->inputs[0],
      torch::arange(24, torch::kFloat32).reshape({4, 6}) / 10.0));
  ASSERT_EQ(data->targets.size(), 1u);
  EXPECT_EQ(data->targets[0].scalar_type(), torch::kInt64);
  EXPECT_TRUE(torch::equal(data->targets[0],
                           torch::tensor({0, 2, 1, 3}, torch::kInt64)));
}

TEST(TensorFileTest, ReadsTupleSampleInputSavedByPython) {
  absl::StatusOr<TrainingData> data =
      LoadTrainingData("tests/testdata/python_sample_tuple.pt");
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->inputs.size(), 2u);
  EXPECT_TRUE(data->targets.empty());
  EXPECT_EQ(data->inputs[1].scalar_type(), torch::kBool);
  EXPECT_EQ(data->inputs[0][0][1].item<int64_t>(), 7);
}

TEST(TensorFileTest, GarbageFileIsInvalidArgumentNamingTheFile) {
  std::string path = TempPath("garbage.pt");
  ASSERT_TRUE(WriteFileAtomically(path, "this is not a zip file").ok());
  absl::StatusOr<TrainingData> data = LoadTrainingData(path);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(data.status().message().find(path), absl::string_view::npos);
  // The message is one readable line, not a C++ backtrace.
  EXPECT_EQ(data.status().message().find("Exception raised from"),
            absl::string_view::npos)
      << data.status();
}

TEST(TensorFileTest, MissingFileIsNotFound) {
  EXPECT_EQ(LoadTrainingData(TempPath("missing.pt")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TensorFileTest, WrongContentsAreExplained) {
  std::string path = TempPath("bad.pt");
  // Mismatched batch sizes.
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("inputs", torch::zeros({4, 2}));
  dict.insert("targets", torch::zeros({3}));
  ASSERT_TRUE(SaveTensorFile(path, c10::IValue(dict)).ok());
  absl::StatusOr<TrainingData> data = LoadTrainingData(path);
  ASSERT_FALSE(data.ok());
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(data.status().message().find("batch size 3"),
            absl::string_view::npos)
      << data.status();

  // An unexpected key.
  c10::impl::GenericDict typo(c10::StringType::get(), c10::AnyType::get());
  typo.insert("input", torch::zeros({4, 2}));
  ASSERT_TRUE(SaveTensorFile(path, c10::IValue(typo)).ok());
  data = LoadTrainingData(path);
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("\"input\""), absl::string_view::npos)
      << data.status();

  // A scalar where a batch is needed.
  ASSERT_TRUE(SaveTensorFile(path, torch::tensor(3.0)).ok());
  data = LoadTrainingData(path);
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("scalar"), absl::string_view::npos)
      << data.status();

  // Not a tensor at all.
  ASSERT_TRUE(SaveTensorFile(path, c10::IValue(int64_t{42})).ok());
  data = LoadTrainingData(path);
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("int"), absl::string_view::npos)
      << data.status();
}

}  // namespace
}  // namespace harmony::common

namespace harmony::common {
namespace {

// Inputs saved as a dict by name ({"inputs": {"src": ..., "tgt_in": ...}})
// are put in the order of forward's arguments.
TEST(TensorFileTest, DictInputsFollowForwardsArguments) {
  absl::StatusOr<TrainingData> data = LoadTrainingData("tests/suite/seq2seq_data.pt");
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ(data->input_names, (std::vector<std::string>{"src", "tgt_in"}));
  const at::Tensor src = data->inputs[0];
  TrainingData swapped = *data;
  std::swap(swapped.inputs[0], swapped.inputs[1]);
  std::swap(swapped.input_names[0], swapped.input_names[1]);
  ASSERT_TRUE(ArrangeInputs({"src", "tgt_in", "tgt_out"}, &swapped).ok());
  EXPECT_TRUE(swapped.input_names.empty());
  EXPECT_TRUE(at::equal(swapped.inputs[0], src));

  TrainingData unknown = *data;
  absl::Status s = ArrangeInputs({"source", "tgt_in", "tgt_out"}, &unknown);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("hold \"src\", but forward takes (source, tgt_in, tgt_out)"),
            absl::string_view::npos)
      << s;
  TrainingData gap = *data;
  s = ArrangeInputs({"extra", "src", "tgt_in"}, &gap);
  EXPECT_NE(s.message().find("argument \"extra\" is missing"), absl::string_view::npos) << s;
}

TEST(TensorFileTest, OneEntryDictIsExplained) {
  absl::StatusOr<TrainingData> data = LoadTrainingData("tests/suite/one_entry_data.pt");
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(data.status().message().find("a dict with exactly one entry"),
            absl::string_view::npos)
      << data.status();
}

// Cross-entropy takes classes in the last dimension, or in dimension 1
// (segmentation), as F.cross_entropy does.
TEST(LossTest, CrossEntropyOverClassesInDimensionOne) {
  torch::manual_seed(2);
  const at::Tensor logits = torch::randn({2, 3, 4, 5});
  const at::Tensor masks = torch::randint(0, 3, {2, 4, 5});
  absl::StatusOr<at::Tensor> loss = LossFromOutput(logits, {masks}, false, LossKind::kAuto);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_TRUE(at::equal(*loss, at::cross_entropy_loss(logits, masks)));
  const at::Tensor lm = torch::randn({2, 6, 7});
  const at::Tensor next = torch::randint(0, 7, {2, 6});
  loss = LossFromOutput(lm, {next}, false, LossKind::kCrossEntropy);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_TRUE(at::equal(*loss, at::cross_entropy_loss(lm.reshape({-1, 7}), next.reshape({-1}))));
}

}  // namespace
}  // namespace harmony::common
