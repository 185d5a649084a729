// harmony-zoo FAMILY [flags] -o model.pt --data data.pt
//
// Writes a TorchScript model of the zoo and a matching synthetic data file.

#include <iostream>
#include <string>

#include <boost/program_options.hpp>

#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/units.h"
#include "zoo/zoo.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  harmony::zoo::ZooOptions o;
  std::string model_path, data_path;
  po::options_description flags(
      "Usage: harmony-zoo FAMILY [flags] -o model.pt --data data.pt\n\n"
      "Writes a TorchScript model (torch.jit.load opens it) and a matching\n"
      "synthetic data file {\"inputs\", \"targets\"} (torch.load opens it).\n"
      "Families: " + absl::StrJoin(harmony::zoo::ZooFamilies(), ", ") +
      "\n\nFlags");
  // clang-format off
  flags.add_options()
      ("help,h", "show this help")
      ("output,o", po::value(&model_path), "model file to write (required)")
      ("data", po::value(&data_path), "data file to write (required)")
      ("depth", po::value(&o.depth)->default_value(o.depth),
       "blocks (gpt, bert), blocks per stage (resnet), convs per stage (vgg), "
       "hidden layers (mlp)")
      ("width", po::value(&o.width)->default_value(o.width),
       "hidden size (gpt, bert, mlp) or first-stage channels (resnet, vgg)")
      ("heads", po::value(&o.heads)->default_value(o.heads), "attention heads")
      ("vocab", po::value(&o.vocab)->default_value(o.vocab), "vocabulary size")
      ("seq-len", po::value(&o.seq_len)->default_value(o.seq_len),
       "sequence length")
      ("dropout", po::value(&o.dropout)->default_value(o.dropout),
       "dropout probability")
      ("classes", po::value(&o.classes)->default_value(o.classes),
       "classes (bert, resnet, vgg, mlp)")
      ("image-size", po::value(&o.image_size)->default_value(o.image_size),
       "image height and width (resnet, vgg)")
      ("input-dim", po::value(&o.input_dim)->default_value(o.input_dim),
       "input features (mlp)")
      ("samples", po::value(&o.samples)->default_value(o.samples),
       "samples in the data file")
      ("seed", po::value(&o.seed)->default_value(o.seed),
       "seed of weights and data");
  // clang-format on
  po::options_description all;
  all.add(flags).add_options()("family", po::value(&o.family));
  po::positional_options_description positional;
  positional.add("family", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv)
                  .options(all)
                  .positional(positional)
                  .run(),
              vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "harmony-zoo: " << e.what() << " (see --help)\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << flags << "\n";
    return 0;
  }
  if (o.family.empty() || model_path.empty() || data_path.empty()) {
    std::cerr << "harmony-zoo: need FAMILY, -o MODEL and --data DATA "
                 "(see --help)\n";
    return 2;
  }
  absl::Status status =
      harmony::zoo::WriteZooModelAndData(o, model_path, data_path);
  if (!status.ok()) {
    std::cerr << "harmony-zoo: " << status.message() << "\n";
    return 1;
  }
  absl::StatusOr<std::string> model = harmony::common::ReadFileToString(model_path);
  std::cout << "wrote " << o.family << " model to " << model_path << " ("
            << harmony::common::FormatBytes(model.ok() ? model->size() : 0)
            << ") and " << o.samples << " samples to " << data_path << "\n";
  return 0;
}
