// The values of inferd's flags that describe engines and models: integers,
// booleans, memory sizes, dtypes, the engine options a model may override,
// and `--model NAME=PATH[,key=value...]` (also a config file's `models`
// entries). Internal to service/ (flags.cc); pure functions, thread-safe.
#ifndef INFERD_SERVICE_MODEL_FLAGS_H_
#define INFERD_SERVICE_MODEL_FLAGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/engine/model_manager.h"

namespace inferd::flags_internal {

// INVALID_ARGUMENT "--flag=value: want".
absl::Status Bad(absl::string_view flag, absl::string_view value,
                 absl::string_view want);
absl::StatusOr<int64_t> ParseInt(absl::string_view flag,
                                 absl::string_view value, int64_t min,
                                 int64_t max);
absl::StatusOr<bool> ParseBool(absl::string_view flag, absl::string_view value);
// "4GiB", "512MiB", "1.5g", "1000000" -> bytes (0 allowed).
absl::StatusOr<int64_t> ParseByteSize(absl::string_view flag,
                                      absl::string_view value);

// Engine options that may also be set per model (`--model n=p,key=value`);
// `*known` false when `key` is none of them.
absl::Status SetEngineOption(absl::string_view key, absl::string_view value,
                             EngineOptions* e, bool* known);

// A model from its name, path and options (`--model` or a config file's
// `models` entry); `where` prefixes errors.
// "300", "90s", "5m", "1h", "2d", "500ms" -> seconds (keep_alive).
absl::StatusOr<double> ParseDuration(absl::string_view value);

absl::Status BuildModel(const std::string& name, const std::string& path,
                        const std::vector<std::pair<std::string, std::string>>&
                            options,
                        const EngineOptions& defaults, const std::string& where,
                        ModelSpec* spec);

// NAME=PATH[,key=value...]
absl::Status ParseModel(absl::string_view value, const EngineOptions& defaults,
                        ModelSpec* spec);

}  // namespace inferd::flags_internal

#endif  // INFERD_SERVICE_MODEL_FLAGS_H_
