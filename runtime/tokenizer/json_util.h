// Small helpers for reading tokenizer.json fields with defaults. Functions
// may throw nlohmann::json exceptions on wrongly typed fields; callers catch
// them at the Tokenizer::FromJson boundary. Stateless; thread-safe.
#ifndef INFERD_RUNTIME_TOKENIZER_JSON_UTIL_H_
#define INFERD_RUNTIME_TOKENIZER_JSON_UTIL_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace inferd {
namespace tokenizer_internal {

using Json = nlohmann::json;

inline bool Has(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && !j.at(key).is_null();
}
inline std::string GetString(const Json& j, const char* key,
                             const std::string& def = "") {
  return Has(j, key) ? j.at(key).get<std::string>() : def;
}
inline bool GetBool(const Json& j, const char* key, bool def) {
  return Has(j, key) ? j.at(key).get<bool>() : def;
}
inline int64_t GetInt(const Json& j, const char* key, int64_t def) {
  return Has(j, key) ? j.at(key).get<int64_t>() : def;
}
inline std::string TypeOf(const Json& j) { return GetString(j, "type"); }

inline absl::Status UnknownType(const char* component,
                                const std::string& type) {
  return absl::InvalidArgumentError(absl::StrCat(
      "tokenizer.json: unknown ", component, " type \"", type, "\""));
}

}  // namespace tokenizer_internal
}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_JSON_UTIL_H_
