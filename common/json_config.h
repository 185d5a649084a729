// Settings files in JSON (harmony-ctl submit --config job.json,
// harmony-exec --config daemon.json): one object whose keys are the
// command's long flag names with '-' written as '_'.
//
//   auto config = JsonConfig::Load("job.json");
//   config->Get("iterations", &iterations);   // sets it when present
//   config->GetPath("data", &data);           // relative to the file
//   HARMONY_RETURN_IF_ERROR(config->Finish()); // unknown keys, wrong types
//
// Errors are InvalidArgument and name the file and the key: "job.json: key
// \"iterations\" must be an integer, found a string"; "unknown key \"iters\"".
//
// Thread-safety: thread-compatible.

#ifndef HARMONY_COMMON_JSON_CONFIG_H_
#define HARMONY_COMMON_JSON_CONFIG_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace harmony::common {

class JsonConfig {
 public:
  // NotFound/... for a file that cannot be read; InvalidArgument for text
  // that is not JSON or not an object.
  static absl::StatusOr<JsonConfig> Load(const std::string& path);
  // `source` names the text in errors.
  static absl::StatusOr<JsonConfig> Parse(absl::string_view text, const std::string& source,
                                          const std::string& dir);
  JsonConfig(JsonConfig&&);
  JsonConfig& operator=(JsonConfig&&);
  ~JsonConfig();

  // Each sets `*value` when the key is present and of the right type; a
  // wrong type is remembered for Finish. Integers must be whole numbers in
  // range; sizes may also be strings like "2GiB".
  void Get(const std::string& key, std::string* value);
  void Get(const std::string& key, int64_t* value);
  void Get(const std::string& key, int* value);
  void Get(const std::string& key, uint64_t* value);
  void Get(const std::string& key, double* value);
  void Get(const std::string& key, bool* value);
  // A byte size: a non-negative integer or a string "512MiB".
  void GetBytes(const std::string& key, uint64_t* value);
  // A path; relative paths are taken relative to the config file's folder.
  void GetPath(const std::string& key, std::string* value);

  bool Has(const std::string& key) const;

  // The first wrong type, or the first key never asked for.
  absl::Status Finish() const;

 private:
  struct Impl;
  explicit JsonConfig(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace harmony::common

#endif  // HARMONY_COMMON_JSON_CONFIG_H_
