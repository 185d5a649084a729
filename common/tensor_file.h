// Tensor files in the format of Python's torch.save / torch.load (a zip
// archive holding a pickle), read and written with torch::pickle_load and
// torch::pickle_save, so users can hand us data saved in Python and load
// what we write.
//
// Training data is a dict {"inputs": X, "targets": Y} where X and Y are each
// a tensor or a tuple/list of tensors, X may also be a dict of tensors keyed
// by forward's argument names, and dimension 0 is the batch. A sample
// input may also be a bare tensor or a tuple of tensors (no targets).
//
// Errors: an unreadable file follows errno (NotFound, ...); anything that is
// not such a file, or holds something else, is InvalidArgument naming the
// file and what was expected and found.
//
// Thread-safety: stateless functions.

#ifndef HARMONY_COMMON_TENSOR_FILE_H_
#define HARMONY_COMMON_TENSOR_FILE_H_

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace harmony::common {

// Loads whatever torch.save stored (tensors, tuples, lists, dicts, scalars),
// each storage read from the file as it is met: the file is never whole in
// memory beside the tensors.
absl::StatusOr<c10::IValue> LoadTensorFile(const std::string& path);

// The same from a file's bytes in memory (read where they are); `source`
// names them in errors.
absl::StatusOr<c10::IValue> ParseTensorFile(absl::string_view bytes, const std::string& source);

// Saves `value` so that torch.load opens it (the archive pickle_save
// makes), written atomically and record by record from the tensors'
// storages, never whole in memory.
absl::Status SaveTensorFile(const std::string& path, const c10::IValue& value);

// Saves a TorchScript module (torch.jit.load opens it), written atomically
// and straight to the file: the same bytes whatever the path (a module
// saved to a path names its records after the file).
absl::Status SaveScriptModule(const torch::jit::Module& module, const std::string& path);

struct TrainingData {
  std::vector<at::Tensor> inputs;
  std::vector<at::Tensor> targets;  // Empty for a bare sample input.
  // When the inputs came as a dict: its keys, one per input, which
  // ArrangeInputs matches to forward's arguments. Empty otherwise.
  std::vector<std::string> input_names;

  // Number of samples (dimension 0, equal across all tensors).
  int64_t size() const;
};

// Interprets a loaded value as training data or a sample input (see above)
// and checks that every tensor has at least one dimension and the same
// dimension 0. `source` names the value in errors.
absl::StatusOr<TrainingData> ToTrainingData(const c10::IValue& value,
                                            absl::string_view source);

absl::StatusOr<TrainingData> LoadTrainingData(const std::string& path);

// Puts inputs that came as a dict ({"inputs": {"src": ..., "tgt": ...}}) in
// the order of forward's arguments and forgets their names; does nothing to
// positional inputs. InvalidArgument when a key is not an argument of
// forward or an argument is neither a key nor left for the targets.
absl::Status ArrangeInputs(const std::vector<std::string>& forward_arguments,
                           TrainingData* data);

// Writes {"inputs": ..., "targets": ...}; a single tensor is stored as a
// tensor, several as a tuple.
absl::Status SaveTrainingData(const std::string& path,
                              const TrainingData& data);

// "[4, 16] int64", for messages.
std::string DescribeTensor(const at::Tensor& tensor);

// "[4, 16] Long, [4] Long": each tensor described, comma-separated.
std::string DescribeTensors(const std::vector<at::Tensor>& tensors);

}  // namespace harmony::common

#endif  // HARMONY_COMMON_TENSOR_FILE_H_
