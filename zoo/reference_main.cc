// harmony-train-reference MODEL --data DATA [--steps N] [--lr X] ...
//
// Trains a TorchScript model with the plain LibTorch loop (the baseline
// Harmony's results must equal) and prints the loss of every step.

#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>

#include <ATen/Parallel.h>

#include <boost/program_options.hpp>
#include <torch/script.h>

#include "common/denormals.h"
#include "common/files.h"
#include "common/tensor_file.h"
#include "common/torch_status.h"
#include "zoo/reference_training.h"

namespace po = boost::program_options;

namespace {

absl::Status Run(const std::string& model_path, const std::string& data_path,
                 const std::string& out_path,
                 harmony::zoo::ReferenceTrainingOptions options) {
  absl::StatusOr<torch::jit::Module> model = harmony::common::CallTorch(
      model_path + ": not a TorchScript model",
      [&] { return torch::jit::load(model_path); });
  if (!model.ok()) return model.status();
  absl::StatusOr<harmony::common::TrainingData> data =
      harmony::common::LoadTrainingData(data_path);
  if (!data.ok()) return data.status();
  std::cout << "training " << model_path << " on " << data->size()
            << " samples from " << data_path << " for " << options.steps
            << " steps (SGD, lr " << options.learning_rate << ")\n";
  options.on_step = [&](int64_t step, double loss) {
    std::cout << "step " << std::setw(4) << step + 1 << "/" << options.steps
              << "  loss " << std::fixed << std::setprecision(6) << loss
              << std::endl;
  };
  absl::StatusOr<std::vector<double>> losses =
      harmony::zoo::TrainReference(*model, *data, options);
  if (!losses.ok()) return losses.status();
  if (!out_path.empty()) {
    absl::StatusOr<std::string> bytes =
        harmony::common::CallTorch("saving " + out_path, [&] {
          std::ostringstream out;
          model->save(out);
          return out.str();
        });
    if (!bytes.ok()) return bytes.status();
    absl::Status written = harmony::common::WriteFileAtomically(out_path, *bytes);
    if (!written.ok()) return written;
    std::cout << "wrote the trained model to " << out_path << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, data_path, out_path, loss = "auto", flush_denormal = "on";
  int threads = 0;
  harmony::zoo::ReferenceTrainingOptions options;
  po::options_description flags(
      "Usage: harmony-train-reference MODEL --data DATA [flags]\n\n"
      "Trains a TorchScript model with plain LibTorch SGD on one device.\n\n"
      "Flags");
  // clang-format off
  flags.add_options()
      ("help,h", "show this help")
      ("data", po::value(&data_path), "training data (torch.save dict "
       "{\"inputs\", \"targets\"}) (required)")
      ("steps", po::value(&options.steps)->default_value(options.steps),
       "training steps")
      ("lr", po::value(&options.learning_rate)->default_value(options.learning_rate),
       "learning rate")
      ("momentum", po::value(&options.momentum)->default_value(options.momentum),
       "SGD momentum")
      ("weight-decay", po::value(&options.weight_decay)->default_value(options.weight_decay),
       "weight decay")
      ("minibatch", po::value(&options.minibatch)->default_value(options.minibatch),
       "samples per step (0: all)")
      ("microbatch", po::value(&options.microbatch)->default_value(options.microbatch),
       "samples per forward/backward pass, losses scaled by their share and gradients "
       "accumulated as Harmony does (0: the whole minibatch at once)")
      ("loss", po::value(&loss)->default_value(loss),
       "auto | cross-entropy | mse (auto: the model's scalar output, else by "
       "target type)")
      ("loss-output", po::value(&options.loss_output),
       "when forward returns a tuple, list, dict or NamedTuple: the element to "
       "train on, by index, key or field (default: the first scalar tensor, else "
       "the first tensor)")
      ("threads", po::value(&threads)->default_value(0),
       "LibTorch intra-op threads (0: LibTorch's default, as PyTorch's); some "
       "kernels round differently at another count: to compare with harmony-exec "
       "bit for bit, pass the threads per device it prints")
      ("flush-denormal", po::value(&flush_denormal)->default_value(flush_denormal),
       "on | off: denormal floats flushed to zero (FTZ/DAZ), as harmony-exec's flag")
      ("out", po::value(&out_path), "write the trained model here");
  // clang-format on
  po::options_description all;
  all.add(flags).add_options()("model", po::value(&model_path));
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv)
                  .options(all)
                  .positional(positional)
                  .run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "harmony-train-reference: " << e.what() << " (see --help)\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << flags << "\n";
    return 0;
  }
  if (model_path.empty() || data_path.empty()) {
    std::cerr << "harmony-train-reference: need MODEL and --data DATA "
                 "(see --help)\n";
    return 2;
  }
  absl::StatusOr<harmony::common::LossKind> loss_kind =
      harmony::common::ParseLossKind(loss);
  if (!loss_kind.ok()) {
    std::cerr << "harmony-train-reference: --loss: " << loss_kind.status().message()
              << "\n";
    return 2;
  }
  options.loss = *loss_kind;
  absl::StatusOr<bool> flush = harmony::common::ParseFlushDenormal(flush_denormal);
  if (!flush.ok()) {
    std::cerr << "harmony-train-reference: " << flush.status().message() << "\n";
    return 2;
  }
  // Before any computation: the intra-op threads inherit it.
  harmony::common::ApplyFlushDenormal(*flush);
  if (threads < 0) {
    std::cerr << "harmony-train-reference: --threads must be 0 or more\n";
    return 2;
  }
  if (threads > 0) at::set_num_threads(threads);
  absl::Status status = Run(model_path, data_path, out_path, options);
  if (!status.ok()) {
    std::cerr << "harmony-train-reference: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
