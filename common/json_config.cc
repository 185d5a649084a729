#include "common/json_config.h"

#include <filesystem>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/units.h"
#include "nlohmann/json.hpp"

namespace harmony::common {

struct JsonConfig::Impl {
  std::string source;
  std::string dir;
  nlohmann::json object;
  std::set<std::string> asked;
  absl::Status error;

  // The value of `key` when present; records it as known.
  const nlohmann::json* Find(const std::string& key) {
    asked.insert(key);
    auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  }

  void WrongType(const std::string& key, const char* want, const nlohmann::json& found) {
    if (!error.ok()) return;
    error = absl::InvalidArgumentError(absl::StrCat(source, ": key \"", key, "\" must be ", want,
                                                    ", found ", found.type_name(), " ",
                                                    found.dump()));
  }

  template <typename T>
  void GetInteger(const std::string& key, T* value) {
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return;
    if (v->is_number_unsigned() && v->get<uint64_t>() <= std::numeric_limits<T>::max()) {
      *value = static_cast<T>(v->get<uint64_t>());
    } else if (v->is_number_integer() && std::numeric_limits<T>::is_signed &&
               v->get<int64_t>() >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
               v->get<int64_t>() <= static_cast<int64_t>(std::numeric_limits<T>::max())) {
      *value = static_cast<T>(v->get<int64_t>());
    } else {
      WrongType(key, std::numeric_limits<T>::is_signed ? "an integer" : "a non-negative integer",
                *v);
    }
  }
};

JsonConfig::JsonConfig(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JsonConfig::JsonConfig(JsonConfig&&) = default;
JsonConfig& JsonConfig::operator=(JsonConfig&&) = default;
JsonConfig::~JsonConfig() = default;

absl::StatusOr<JsonConfig> JsonConfig::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  std::string dir = std::filesystem::path(path).parent_path().string();
  return Parse(*text, path, dir.empty() ? "." : dir);
}

absl::StatusOr<JsonConfig> JsonConfig::Parse(absl::string_view text, const std::string& source,
                                             const std::string& dir) {
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  impl->dir = dir;
  // nlohmann::json throws on malformed text; that stops here.
  try {
    impl->object = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not JSON: ", e.what()));
  }
  if (!impl->object.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": must hold a JSON object {...}, found ",
                                                   impl->object.type_name()));
  }
  return JsonConfig(std::move(impl));
}

void JsonConfig::Get(const std::string& key, std::string* value) {
  const nlohmann::json* v = impl_->Find(key);
  if (v == nullptr) return;
  if (v->is_string()) {
    *value = v->get<std::string>();
  } else {
    impl_->WrongType(key, "a string", *v);
  }
}

void JsonConfig::Get(const std::string& key, int64_t* value) { impl_->GetInteger(key, value); }
void JsonConfig::Get(const std::string& key, int* value) { impl_->GetInteger(key, value); }
void JsonConfig::Get(const std::string& key, uint64_t* value) { impl_->GetInteger(key, value); }

void JsonConfig::Get(const std::string& key, double* value) {
  const nlohmann::json* v = impl_->Find(key);
  if (v == nullptr) return;
  if (v->is_number()) {
    *value = v->get<double>();
  } else {
    impl_->WrongType(key, "a number", *v);
  }
}

void JsonConfig::Get(const std::string& key, bool* value) {
  const nlohmann::json* v = impl_->Find(key);
  if (v == nullptr) return;
  if (v->is_boolean()) {
    *value = v->get<bool>();
  } else {
    impl_->WrongType(key, "true or false", *v);
  }
}

void JsonConfig::GetBytes(const std::string& key, uint64_t* value) {
  const nlohmann::json* v = impl_->Find(key);
  if (v == nullptr) return;
  if (v->is_string()) {
    absl::StatusOr<uint64_t> bytes = ParseBytes(v->get<std::string>());
    if (bytes.ok()) {
      *value = *bytes;
    } else {
      impl_->WrongType(key, "a size such as \"2GiB\"", *v);
    }
    return;
  }
  impl_->GetInteger(key, value);
}

void JsonConfig::GetPath(const std::string& key, std::string* value) {
  std::string path;
  const bool present = Has(key);
  Get(key, &path);
  if (!present || !impl_->error.ok()) return;
  if (!path.empty() && std::filesystem::path(path).is_relative()) {
    path = (std::filesystem::path(impl_->dir) / path).lexically_normal().string();
  }
  *value = path;
}

bool JsonConfig::Has(const std::string& key) const { return impl_->object.contains(key); }

absl::Status JsonConfig::Finish() const {
  if (!impl_->error.ok()) return impl_->error;
  for (const auto& [key, value] : impl_->object.items()) {
    if (impl_->asked.count(key) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(impl_->source, ": unknown key \"", key, "\""));
    }
  }
  return absl::OkStatus();
}

}  // namespace harmony::common
