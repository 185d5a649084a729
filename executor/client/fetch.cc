#include "executor/client/fetch.h"

#include <filesystem>

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

}  // namespace harmony::executor
