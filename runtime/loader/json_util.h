// Helpers shared by the loader's config parsers: file access and typed,
// error-reporting access to JSON object fields. Internal to runtime/loader.
// Stateless functions and a thread-compatible value type.
#ifndef INFERD_RUNTIME_LOADER_JSON_UTIL_H_
#define INFERD_RUNTIME_LOADER_JSON_UTIL_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "nlohmann/json.hpp"

namespace inferd {
namespace loader_internal {

std::string JoinPath(absl::string_view dir, absl::string_view name);
bool IsRegularFile(const std::string& path);
bool IsDirectory(const std::string& path);
// NOT_FOUND when the file cannot be opened.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);
// INVALID_ARGUMENT naming `source` unless `text` is a JSON object.
absl::StatusOr<nlohmann::json> ParseJsonObject(absl::string_view text,
                                               absl::string_view source);

// Typed reads of an object's fields. A field that is absent or JSON null
// takes the default; a field of the wrong type is INVALID_ARGUMENT naming
// the field and `source`. Holds references: `object` must outlive it.
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, absl::string_view source)
      : object_(object), source_(source) {}

  // Present and not null.
  bool Has(absl::string_view key) const;
  const nlohmann::json* Find(absl::string_view key) const;

  absl::StatusOr<int64_t> Int(absl::string_view key, int64_t fallback) const;
  absl::StatusOr<absl::optional<int64_t>> OptionalInt(
      absl::string_view key) const;
  absl::StatusOr<int64_t> RequiredInt(absl::string_view key) const;
  absl::StatusOr<double> Double(absl::string_view key, double fallback) const;
  absl::StatusOr<absl::optional<double>> OptionalDouble(
      absl::string_view key) const;
  absl::StatusOr<bool> Bool(absl::string_view key, bool fallback) const;
  absl::StatusOr<absl::optional<bool>> OptionalBool(
      absl::string_view key) const;
  absl::StatusOr<std::string> String(absl::string_view key,
                                     absl::string_view fallback) const;

  // INVALID_ARGUMENT "<source>: field '<key>' <what>".
  absl::Status Error(absl::string_view key, absl::string_view what) const;
  absl::string_view source() const { return source_; }

 private:
  const nlohmann::json& object_;
  std::string source_;
};

// Integer value of `v` (integers, or floats with an integral value).
absl::optional<int64_t> AsInt(const nlohmann::json& v);

}  // namespace loader_internal
}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_JSON_UTIL_H_
