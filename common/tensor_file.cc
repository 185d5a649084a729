#include "common/tensor_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/status.h"
#include "common/torch_status.h"

namespace harmony::common {
namespace {

absl::Status Invalid(absl::string_view source, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", why));
}

std::string DescribeValue(const c10::IValue& value) {
  if (value.isTensor()) return absl::StrCat("a tensor ", DescribeTensor(value.toTensor()));
  return absl::StrCat("a value of type ", value.type()->str());
}

// A tensor, or a tuple/list of tensors, as a vector; with `names`, also a
// dict of tensors, whose keys are appended there.
absl::StatusOr<std::vector<at::Tensor>> ToTensors(const c10::IValue& value,
                                                  absl::string_view source,
                                                  absl::string_view what,
                                                  std::vector<std::string>* names = nullptr) {
  std::vector<at::Tensor> tensors;
  auto add = [&](const c10::IValue& element) -> absl::Status {
    if (!element.isTensor()) {
      return Invalid(source,
                     absl::StrCat(what, " must be a tensor or a tuple of "
                                        "tensors, found an element that is ",
                                  DescribeValue(element)));
    }
    tensors.push_back(element.toTensor());
    return absl::OkStatus();
  };
  if (value.isTensor()) {
    HARMONY_RETURN_IF_ERROR(add(value));
  } else if (value.isTuple()) {
    for (const c10::IValue& e : value.toTupleRef().elements()) {
      HARMONY_RETURN_IF_ERROR(add(e));
    }
  } else if (value.isList()) {
    for (const c10::IValue& e : value.toListRef()) {
      HARMONY_RETURN_IF_ERROR(add(e));
    }
  } else if (value.isGenericDict() && names != nullptr) {
    for (const auto& entry : value.toGenericDict()) {
      if (!entry.key().isString()) {
        return Invalid(source, absl::StrCat(what, ": a dict of tensors needs string keys (forward's "
                                                  "argument names)"));
      }
      names->push_back(entry.key().toStringRef());
      HARMONY_RETURN_IF_ERROR(add(entry.value()));
    }
  } else {
    return Invalid(source, absl::StrCat(what,
                                        " must be a tensor or a tuple of "
                                        "tensors, found ",
                                        DescribeValue(value)));
  }
  if (tensors.empty()) {
    return Invalid(source, absl::StrCat(what, " holds no tensors"));
  }
  return tensors;
}

c10::IValue FromTensors(const std::vector<at::Tensor>& tensors) {
  if (tensors.size() == 1) return tensors.front();
  std::vector<c10::IValue> elements(tensors.begin(), tensors.end());
  return c10::ivalue::Tuple::create(std::move(elements));
}

}  // namespace

std::string DescribeTensor(const at::Tensor& tensor) {
  if (!tensor.defined()) return "(undefined)";
  return absl::StrCat("[", absl::StrJoin(tensor.sizes(), ", "), "] ",
                      c10::toString(tensor.scalar_type()));
}

std::string DescribeTensors(const std::vector<at::Tensor>& tensors) {
  std::vector<std::string> parts;
  for (const at::Tensor& t : tensors) parts.push_back(DescribeTensor(t));
  return absl::StrJoin(parts, ", ");
}

int64_t TrainingData::size() const {
  return inputs.empty() ? 0 : inputs.front().size(0);
}

namespace {

// A file's bytes where the archive reader asks for them (pread): the
// records come off the disk one at a time, never the whole file at once.
class FileReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  static absl::StatusOr<std::shared_ptr<FileReader>> Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::ErrnoToStatus(errno, path);
    auto reader = std::shared_ptr<FileReader>(new FileReader(fd));
    struct stat st;
    if (::fstat(fd, &st) != 0) return absl::ErrnoToStatus(errno, path);
    if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat(path, ": not a file"));
    reader->size_ = static_cast<size_t>(st.st_size);
    return reader;
  }
  ~FileReader() override { ::close(fd_); }
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    char* out = static_cast<char*>(buf);
    size_t done = 0;
    while (done < n) {
      const ssize_t r = ::pread(fd_, out + done, n - done, static_cast<off_t>(pos + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }

 private:
  explicit FileReader(int fd) : fd_(fd) {}
  const int fd_;
  size_t size_ = 0;
};

// Bytes in memory, read where they are.
class BytesReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BytesReader(absl::string_view bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min(n, bytes_.size() - static_cast<size_t>(pos));
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const absl::string_view bytes_;
};

// What torch::jit::pickle_load reads (torch.save's archive), each storage
// read from its record as the unpickler meets it: pickle_load takes the
// archive as a vector and copies it, so a checkpoint sat in memory three
// times over (the file's string, the vector, the copy) beside its tensors.
absl::StatusOr<c10::IValue> ReadArchive(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> in,
                                        const std::string& source) {
  absl::StatusOr<c10::IValue> value = CallTorch(
      absl::StrCat(source, ": not a tensor file written by torch.save"), [&] {
        caffe2::serialize::PyTorchStreamReader archive(std::move(in));
        at::DataPtr pickle;
        size_t pickle_size = 0;
        std::tie(pickle, pickle_size) = archive.getRecord("data.pkl");
        const char* pickled = static_cast<const char*>(pickle.get());
        size_t pos = 0;
        torch::jit::Unpickler unpickler(
            [&](char* buf, size_t n) -> size_t {
              n = std::min(n, pickle_size - pos);
              std::memcpy(buf, pickled + pos, n);
              pos += n;
              return n;
            },
            torch::jit::TypeResolver(), torch::jit::ObjLoader(),
            std::function<at::DataPtr(const std::string&)>([&](const std::string& key) {
              return std::get<0>(archive.getRecord(absl::StrCat("data/", key)));
            }),
            /*device=*/{});
        unpickler.set_version(archive.version());
        return unpickler.parse_ivalue();
      });
  if (!value.ok() &&
      absl::StrContains(value.status().message(), "Unknown opcode for unpickling at 0x73")) {
    // Python pickles a dict of one entry with SETITEM, which LibTorch 1.13's
    // unpickler does not know (it reads SETITEMS, used for two or more).
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": holds a dict with exactly one entry, which LibTorch 1.13 cannot read "
                "(pickle opcode SETITEM); save it with a second entry (\"targets\", or "
                "another input) or as a tuple"));
  }
  return value;
}

}  // namespace

absl::StatusOr<c10::IValue> LoadTensorFile(const std::string& path) {
  HARMONY_ASSIGN_OR_RETURN(std::shared_ptr<FileReader> file, FileReader::Open(path));
  return ReadArchive(std::move(file), path);
}

absl::StatusOr<c10::IValue> ParseTensorFile(absl::string_view bytes, const std::string& source) {
  return ReadArchive(std::make_shared<BytesReader>(bytes), source);
}

namespace {

// The archive torch::jit::pickle_save makes (torch.save's: "data.pkl" and a
// record "data/<i>" per storage), written to `out` record by record from
// the tensors' own storages. pickle_save builds it in memory first, in a
// vector that doubles: a checkpoint of a 1.51 GiB GPT with Adam (4.53
// GiB) took the run's resident memory to 22.1 GiB.
void WritePickleArchive(std::ostream& out, const c10::IValue& value) {
  std::vector<char> pickled;  // The structure; the tensors' bytes are records.
  torch::jit::Pickler pickler(
      [&](const char* data, size_t n) { pickled.insert(pickled.end(), data, data + n); });
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) -> size_t {
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
    return out ? n : 0;
  });
  const std::vector<at::Tensor>& tensors = pickler.tensorData();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const torch::jit::WriteableTensorData t = torch::jit::getWriteableTensorData(tensors[i]);
    writer.writeRecord(absl::StrCat("data/", i), t.data(), t.sizeInBytes());
  }
  writer.writeRecord("data.pkl", pickled.data(), pickled.size());
  writer.writeEndOfFile();
}

// Has `write` serialise into a stream on `path`'s temporary file, which
// then replaces `path` (WriteFileAtomicallyWith).
absl::Status StreamAtomically(const std::string& path, absl::string_view what,
                              const std::function<void(std::ostream&)>& write) {
  return WriteFileAtomicallyWith(path, [&](const std::string& tmp) -> absl::Status {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::ErrnoToStatus(errno, tmp);
    absl::Status written = CallTorch(absl::StrCat(what, " ", path), [&] { write(out); },
                                     absl::StatusCode::kInternal);
    // A write the file refused (a full disk) says so, not the serialiser's
    // "failed writing".
    if (!written.ok() && !out) {
      return absl::ErrnoToStatus(errno != 0 ? errno : EIO, absl::StrCat("writing ", tmp));
    }
    HARMONY_RETURN_IF_ERROR(written);
    out.close();
    if (!out) return absl::ErrnoToStatus(errno != 0 ? errno : EIO, absl::StrCat("writing ", tmp));
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status SaveScriptModule(const torch::jit::Module& module, const std::string& path) {
  return StreamAtomically(path, "saving", [&](std::ostream& out) { module.save(out); });
}

absl::Status SaveTensorFile(const std::string& path, const c10::IValue& value) {
  return StreamAtomically(path, "serialising",
                          [&](std::ostream& out) { WritePickleArchive(out, value); });
}

absl::StatusOr<TrainingData> ToTrainingData(const c10::IValue& value,
                                            absl::string_view source) {
  TrainingData data;
  if (value.isGenericDict()) {
    c10::IValue inputs, targets;
    for (const auto& entry : value.toGenericDict()) {
      if (!entry.key().isString()) {
        return Invalid(source, "dict keys must be strings (\"inputs\", "
                               "\"targets\")");
      }
      const std::string& key = entry.key().toStringRef();
      if (key == "inputs") {
        inputs = entry.value();
      } else if (key == "targets") {
        targets = entry.value();
      } else {
        return Invalid(source, absl::StrCat("unexpected key \"", key,
                                            "\" (expected \"inputs\" and "
                                            "\"targets\")"));
      }
    }
    if (inputs.isNone()) {
      return Invalid(source, "the dict has no \"inputs\" entry");
    }
    HARMONY_ASSIGN_OR_RETURN(data.inputs,
                             ToTensors(inputs, source, "inputs", &data.input_names));
    if (!targets.isNone()) {
      HARMONY_ASSIGN_OR_RETURN(data.targets,
                               ToTensors(targets, source, "targets"));
    }
  } else {
    HARMONY_ASSIGN_OR_RETURN(
        data.inputs,
        ToTensors(value, source,
                  "the sample input (a tensor, a tuple of tensors or a dict "
                  "{\"inputs\", \"targets\"})"));
  }
  auto check = [&](const std::vector<at::Tensor>& tensors,
                   absl::string_view what) -> absl::Status {
    for (size_t i = 0; i < tensors.size(); ++i) {
      const at::Tensor& t = tensors[i];
      if (t.dim() == 0) {
        return Invalid(source, absl::StrCat(what, "[", i,
                                            "] is a scalar; dimension 0 must "
                                            "be the batch"));
      }
      if (t.size(0) != data.inputs.front().size(0)) {
        return Invalid(source,
                       absl::StrCat(what, "[", i, "] ", DescribeTensor(t),
                                    " has batch size ", t.size(0),
                                    " but inputs[0] ",
                                    DescribeTensor(data.inputs.front()),
                                    " has ", data.inputs.front().size(0)));
      }
    }
    return absl::OkStatus();
  };
  HARMONY_RETURN_IF_ERROR(check(data.inputs, "inputs"));
  HARMONY_RETURN_IF_ERROR(check(data.targets, "targets"));
  return data;
}

absl::StatusOr<TrainingData> LoadTrainingData(const std::string& path) {
  HARMONY_ASSIGN_OR_RETURN(c10::IValue value, LoadTensorFile(path));
  return ToTrainingData(value, path);
}

absl::Status ArrangeInputs(const std::vector<std::string>& forward_arguments,
                           TrainingData* data) {
  if (data->input_names.empty()) return absl::OkStatus();
  std::vector<at::Tensor> inputs;
  std::vector<std::string> names;
  for (const std::string& argument : forward_arguments) {
    auto it = std::find(data->input_names.begin(), data->input_names.end(), argument);
    if (it == data->input_names.end()) continue;
    inputs.push_back(data->inputs[it - data->input_names.begin()]);
    names.push_back(argument);
  }
  for (const std::string& name : data->input_names) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the data's inputs hold \"", name, "\", but forward takes (",
          absl::StrJoin(forward_arguments, ", "), ")"));
    }
  }
  // The named inputs come first; the arguments after them take the targets.
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] != forward_arguments[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "forward takes (", absl::StrJoin(forward_arguments, ", "),
          ") but the data's inputs hold ", absl::StrJoin(data->input_names, ", "),
          ": argument \"", forward_arguments[i], "\" is missing"));
    }
  }
  data->inputs = std::move(inputs);
  data->input_names.clear();
  return absl::OkStatus();
}

absl::Status SaveTrainingData(const std::string& path,
                              const TrainingData& data) {
  if (data.inputs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("saving ", path, ": training data has no inputs"));
  }
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("inputs", FromTensors(data.inputs));
  if (!data.targets.empty()) dict.insert("targets", FromTensors(data.targets));
  return SaveTensorFile(path, c10::IValue(dict));
}

}  // namespace harmony::common
