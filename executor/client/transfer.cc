#include "executor/client/transfer.h"

#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace harmony::executor {

absl::Status FetchTo(ExecutorClient& client, const std::string& id, const std::string& out,
                     bool checkpoint, bool overwrite, uint64_t* bytes) {
  std::error_code error;
  if (!overwrite && std::filesystem::exists(out, error)) {
    return absl::AlreadyExistsError(
        absl::StrCat(out, " exists; it is left as it is: name another file, or give --overwrite"));
  }
  absl::StatusOr<std::string> data = client.FetchModel(id, checkpoint);
  if (!data.ok()) return data.status();
  if (bytes != nullptr) *bytes = data->size();
  return common::WriteFileAtomically(out, *data);
}

namespace {

// The file's bytes when it is to be sent, else nullopt (send its path).
absl::StatusOr<std::optional<std::string>> Payload(const std::string& path, bool by_path,
                                                   bool always, uint64_t limit) {
  if (by_path && !always) return std::optional<std::string>();
  std::error_code error;
  const uint64_t size = std::filesystem::file_size(path, error);
  if (!always && (error || size > limit)) return std::optional<std::string>();
  absl::StatusOr<std::string> bytes = common::ReadFileToString(path);
  if (!bytes.ok()) return bytes.status();
  return std::optional<std::string>(*std::move(bytes));
}

std::string Absolute(const std::string& path) {
  std::error_code error;
  const std::filesystem::path p = std::filesystem::absolute(path, error);
  return error ? path : p.lexically_normal().string();
}

std::string FileName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

}  // namespace

absl::Status AttachFiles(const std::string& model, const std::string& data,
                         const std::string& eval_data, bool by_path, bool upload_model,
                         uint64_t limit, proto::SubmitJobRequest* request) {
  absl::StatusOr<std::optional<std::string>> m = Payload(model, by_path, upload_model, limit);
  if (!m.ok()) return m.status();
  if (m->has_value()) {
    request->set_model_bytes(**std::move(m));
  } else {
    request->set_model_path(Absolute(model));
  }
  absl::StatusOr<std::optional<std::string>> d = Payload(data, by_path, false, limit);
  if (!d.ok()) return d.status();
  if (d->has_value()) {
    request->set_data_bytes(**std::move(d));
    request->set_data_name(FileName(data));
  } else {
    request->set_data_path(Absolute(data));
  }
  if (eval_data.empty()) return absl::OkStatus();
  absl::StatusOr<std::optional<std::string>> e = Payload(eval_data, by_path, false, limit);
  if (!e.ok()) return e.status();
  if (e->has_value()) {
    request->set_eval_data_bytes(**std::move(e));
    request->set_eval_data_name(FileName(eval_data));
    request->mutable_optimizer()->set_eval_data_path("");
  }
  return absl::OkStatus();
}

}  // namespace harmony::executor
