#include "runtime/loader/json_util.h"

#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace inferd {
namespace loader_internal {

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (dir.empty() || dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  if (!IsRegularFile(path)) {
    return absl::NotFoundError(absl::StrCat("file not found: ", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<nlohmann::json> ParseJsonObject(absl::string_view text,
                                               absl::string_view source) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " is not valid JSON: ", e.what()));
  }
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " is not a JSON object"));
  }
  return value;
}

absl::optional<int64_t> AsInt(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return absl::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) {
      return static_cast<int64_t>(d);
    }
  }
  return absl::nullopt;
}

const nlohmann::json* JsonFields::Find(absl::string_view key) const {
  auto it = object_.find(std::string(key));
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFields::Has(absl::string_view key) const {
  return Find(key) != nullptr;
}

absl::Status JsonFields::Error(absl::string_view key,
                               absl::string_view what) const {
  return absl::InvalidArgumentError(
      absl::StrCat(source_, ": field '", key, "' ", what));
}

absl::StatusOr<absl::optional<int64_t>> JsonFields::OptionalInt(
    absl::string_view key) const {
  const nlohmann::json* v = Find(key);
  if (v == nullptr) return absl::optional<int64_t>();
  absl::optional<int64_t> i = AsInt(*v);
  if (!i.has_value()) return Error(key, "must be an integer");
  return i;
}

absl::StatusOr<int64_t> JsonFields::Int(absl::string_view key,
                                        int64_t fallback) const {
  absl::StatusOr<absl::optional<int64_t>> v = OptionalInt(key);
  if (!v.ok()) return v.status();
  return v->value_or(fallback);
}

absl::StatusOr<int64_t> JsonFields::RequiredInt(absl::string_view key) const {
  absl::StatusOr<absl::optional<int64_t>> v = OptionalInt(key);
  if (!v.ok()) return v.status();
  if (!v->has_value()) return Error(key, "is required but missing");
  return **v;
}

absl::StatusOr<absl::optional<double>> JsonFields::OptionalDouble(
    absl::string_view key) const {
  const nlohmann::json* v = Find(key);
  if (v == nullptr) return absl::optional<double>();
  if (!v->is_number()) return Error(key, "must be a number");
  return absl::optional<double>(v->get<double>());
}

absl::StatusOr<double> JsonFields::Double(absl::string_view key,
                                          double fallback) const {
  absl::StatusOr<absl::optional<double>> v = OptionalDouble(key);
  if (!v.ok()) return v.status();
  return v->value_or(fallback);
}

absl::StatusOr<absl::optional<bool>> JsonFields::OptionalBool(
    absl::string_view key) const {
  const nlohmann::json* v = Find(key);
  if (v == nullptr) return absl::optional<bool>();
  if (!v->is_boolean()) return Error(key, "must be true or false");
  return absl::optional<bool>(v->get<bool>());
}

absl::StatusOr<bool> JsonFields::Bool(absl::string_view key,
                                      bool fallback) const {
  absl::StatusOr<absl::optional<bool>> v = OptionalBool(key);
  if (!v.ok()) return v.status();
  return v->value_or(fallback);
}

absl::StatusOr<std::string> JsonFields::String(
    absl::string_view key, absl::string_view fallback) const {
  const nlohmann::json* v = Find(key);
  if (v == nullptr) return std::string(fallback);
  if (!v->is_string()) return Error(key, "must be a string");
  return v->get<std::string>();
}

}  // namespace loader_internal
}  // namespace inferd
