#include "executor/runtime/checkpoint.h"

#include <chrono>
#include <filesystem>
#include <system_error>
#include <utility>

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status.h"
#include "common/tensor_file.h"
#include "common/torch_status.h"

namespace harmony::executor {
namespace {

constexpr char kFormat[] = "harmony-checkpoint-1";
constexpr char kPrefix[] = "checkpoint-";
constexpr char kSuffix[] = ".pt";

c10::Dict<std::string, at::Tensor> ToDict(const std::map<std::string, at::Tensor>& tensors) {
  c10::Dict<std::string, at::Tensor> out;
  for (const auto& [name, t] : tensors) out.insert(name, t);
  return out;
}

absl::Status Malformed(const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": not a Harmony checkpoint (", why, ")"));
}

// A file that is no torch.save archive is no checkpoint (a missing one is
// NotFound as it was).
absl::Status NotACheckpoint(const absl::Status& s, const std::string& path) {
  return s.code() == absl::StatusCode::kInvalidArgument ? Malformed(path, s.message()) : s;
}

absl::StatusOr<Checkpoint> FromValue(const c10::IValue& value, const std::string& path) {
  if (!value.isGenericDict()) return Malformed(path, "not a dict");
  const c10::impl::GenericDict d = value.toGenericDict();
  auto get = [&](const char* key) -> absl::StatusOr<c10::IValue> {
    auto it = d.find(c10::IValue(std::string(key)));
    if (it == d.end()) return Malformed(path, absl::StrCat("no \"", key, "\""));
    return it->value();
  };
  HARMONY_ASSIGN_OR_RETURN(c10::IValue format, get("format"));
  if (!format.isString() || format.toStringRef() != kFormat) {
    return Malformed(path, absl::StrCat("format ", format.isString() ? format.toStringRef() : "?",
                                        ", expected ", kFormat));
  }
  Checkpoint c;
  auto get_int = [&](const char* key, int64_t* out) -> absl::Status {
    HARMONY_ASSIGN_OR_RETURN(c10::IValue v, get(key));
    if (!v.isInt()) return Malformed(path, absl::StrCat("\"", key, "\" is not an integer"));
    *out = v.toInt();
    return absl::OkStatus();
  };
  auto get_string = [&](const char* key, std::string* out) -> absl::Status {
    HARMONY_ASSIGN_OR_RETURN(c10::IValue v, get(key));
    if (!v.isString()) return Malformed(path, absl::StrCat("\"", key, "\" is not a string"));
    *out = v.toStringRef();
    return absl::OkStatus();
  };
  auto get_tensors = [&](const char* key,
                         std::map<std::string, at::Tensor>* out) -> absl::Status {
    HARMONY_ASSIGN_OR_RETURN(c10::IValue v, get(key));
    if (!v.isGenericDict()) return Malformed(path, absl::StrCat("\"", key, "\" is not a dict"));
    for (const auto& e : v.toGenericDict()) {
      if (!e.key().isString() || !e.value().isTensor()) {
        return Malformed(path, absl::StrCat("\"", key, "\" holds a non-tensor"));
      }
      (*out)[e.key().toStringRef()] = e.value().toTensor();
    }
    return absl::OkStatus();
  };
  int64_t seed = 0;
  HARMONY_RETURN_IF_ERROR(get_string("model_sha256", &c.model_sha256));
  HARMONY_RETURN_IF_ERROR(get_int("iteration", &c.iteration));
  HARMONY_RETURN_IF_ERROR(get_int("minibatch", &c.minibatch));
  if (d.contains(c10::IValue(std::string("world_size")))) {  // Since checkpoints of worlds.
    HARMONY_RETURN_IF_ERROR(get_int("world_size", &c.world_size));
  }
  HARMONY_RETURN_IF_ERROR(get_int("seed", &seed));
  c.seed = static_cast<uint64_t>(seed);
  HARMONY_ASSIGN_OR_RETURN(c10::IValue shuffle, get("shuffle"));
  if (!shuffle.isBool()) return Malformed(path, "\"shuffle\" is not a bool");
  c.shuffle = shuffle.toBool();
  HARMONY_RETURN_IF_ERROR(get_string("optimizer", &c.optimizer));
  HARMONY_RETURN_IF_ERROR(get_int("optimizer_steps", &c.optimizer_steps));
  if (d.contains(c10::IValue(std::string("recipe")))) {  // Since schedules and clipping.
    HARMONY_RETURN_IF_ERROR(get_string("recipe", &c.recipe));
  }
  HARMONY_RETURN_IF_ERROR(get_tensors("weights", &c.weights));
  HARMONY_RETURN_IF_ERROR(get_tensors("optimizer_state", &c.optimizer_state));
  HARMONY_ASSIGN_OR_RETURN(c10::IValue metrics, get("metrics"));
  if (!metrics.isList()) return Malformed(path, "\"metrics\" is not a list");
  for (const c10::IValue& m : metrics.toListRef()) {
    if (!m.isString()) return Malformed(path, "\"metrics\" holds a non-string");
    c.metrics.push_back(m.toStringRef());
  }
  if (c.iteration < 0 || c.minibatch < 1) {
    return Malformed(path, absl::StrCat("iteration ", c.iteration, ", minibatch ", c.minibatch));
  }
  return c;
}

}  // namespace

uint64_t Checkpoint::bytes() const {
  uint64_t out = 0;
  for (const auto& [name, t] : weights) out += t.nbytes();
  for (const auto& [name, t] : optimizer_state) out += t.nbytes();
  return out;
}

absl::Status WriteCheckpoint(const Checkpoint& c, const std::string& path) {
  HARMONY_ASSIGN_OR_RETURN(c10::IValue value, common::CallTorch(
      absl::StrCat("serialising checkpoint ", path), [&] {
        c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
        d.insert("format", std::string(kFormat));
        d.insert("model_sha256", c.model_sha256);
        d.insert("iteration", c.iteration);
        d.insert("minibatch", c.minibatch);
        d.insert("world_size", c.world_size);
        d.insert("seed", static_cast<int64_t>(c.seed));
        d.insert("shuffle", c.shuffle);
        d.insert("optimizer", c.optimizer);
        d.insert("optimizer_steps", c.optimizer_steps);
        if (!c.recipe.empty()) d.insert("recipe", c.recipe);
        d.insert("weights", ToDict(c.weights));
        d.insert("optimizer_state", ToDict(c.optimizer_state));
        c10::List<std::string> metrics;
        for (const std::string& m : c.metrics) metrics.push_back(m);
        d.insert("metrics", metrics);
        return c10::IValue(d);
      }));
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  // Written as it is made, from the snapshot's tensors (common/tensor_file.h).
  return common::SaveTensorFile(path, value);
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path) {
  absl::StatusOr<c10::IValue> value = common::LoadTensorFile(path);
  if (!value.ok()) return NotACheckpoint(value.status(), path);
  return FromValue(*value, path);
}

absl::StatusOr<Checkpoint> ParseCheckpoint(absl::string_view bytes, const std::string& path) {
  absl::StatusOr<c10::IValue> value = common::ParseTensorFile(bytes, path);
  if (!value.ok()) return NotACheckpoint(value.status(), path);
  return FromValue(*value, path);
}

std::string CheckpointPath(const std::string& dir, int64_t iteration) {
  return absl::StrCat(dir, "/", kPrefix, iteration, kSuffix);
}

std::map<int64_t, std::string> ListCheckpoints(const std::string& dir) {
  std::map<int64_t, std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!absl::StartsWith(name, kPrefix) || !absl::EndsWith(name, kSuffix)) continue;
    int64_t iteration = 0;
    const std::string digits = name.substr(sizeof(kPrefix) - 1,
                                           name.size() - (sizeof(kPrefix) - 1) - (sizeof(kSuffix) - 1));
    if (absl::SimpleAtoi(digits, &iteration)) out[iteration] = e.path().string();
  }
  return out;
}

absl::StatusOr<std::string> ResolveCheckpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return path;
  const std::map<int64_t, std::string> all = ListCheckpoints(path);
  if (all.empty()) {
    return absl::NotFoundError(absl::StrCat("no checkpoint (", kPrefix, "N", kSuffix, ") in ", path));
  }
  return all.rbegin()->second;
}

void PruneCheckpoints(const std::string& dir, int keep) {
  std::map<int64_t, std::string> all = ListCheckpoints(dir);
  std::error_code ec;
  while (static_cast<int>(all.size()) > std::max(keep, 1)) {
    std::filesystem::remove(all.begin()->second, ec);
    all.erase(all.begin());
  }
}

namespace {

double Monotonic() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Checkpointer::Checkpointer(CheckpointPolicy policy)
    : policy_(std::move(policy)), last_(Monotonic()) {}

Checkpointer::~Checkpointer() { (void)Finish(); }

bool Checkpointer::Due(int64_t iteration) const {
  if (!enabled()) return false;
  if (policy_.every_iterations > 0 && iteration % policy_.every_iterations == 0) return true;
  return policy_.every_minutes > 0 && Monotonic() - last_ >= policy_.every_minutes * 60;
}

std::string Checkpointer::Write(Checkpoint c) {
  (void)Finish();  // One write at a time; its error was reported by Finish.
  last_ = Monotonic();
  const std::string path = CheckpointPath(policy_.dir, c.iteration);
  last_path_ = path;
  done_ = false;
  writer_ = std::thread([this, path, c = std::move(c)] {
    const double start = Monotonic();
    status_ = WriteCheckpoint(c, path);
    if (status_.ok()) PruneCheckpoints(policy_.dir, policy_.keep);
    seconds_ = Monotonic() - start;
    done_ = true;
  });
  return path;
}

absl::Status Checkpointer::Finish(double* seconds) {
  if (!writer_.joinable()) return absl::OkStatus();
  writer_.join();
  if (seconds != nullptr) *seconds = seconds_;
  absl::Status s = std::move(status_);
  status_ = absl::OkStatus();
  return s;
}

}  // namespace harmony::executor
