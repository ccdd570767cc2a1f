// The --config file of the inferd binary (YAML; JSON is read as the YAML
// subset it is): top-level keys are flag names without the dashes, `models`
// a list of {name, path, per-model options}, `plugins` a list of paths.
// Read with yaml-cpp; this file only turns the document into raw key/value
// strings, which service/flags.cc checks exactly like command-line flags.
// Pure functions; thread-compatible.
#ifndef INFERD_SERVICE_CONFIG_FILE_H_
#define INFERD_SERVICE_CONFIG_FILE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace inferd {

struct RawConfigModel {
  std::string name;
  std::string path;
  // Every other key of the model's map, in file order.
  std::vector<std::pair<std::string, std::string>> options;
  // "FILE: models[i]", for error messages.
  std::string where;
};

struct RawConfig {
  // Top-level scalar keys (null values left out), in file order.
  std::vector<std::pair<std::string, std::string>> scalars;
  std::vector<std::string> plugins;
  std::vector<RawConfigModel> models;
};

// Reads `path`. INVALID_ARGUMENT naming the file (and the key, or the line
// and column of a syntax error) when it cannot be read or has the wrong
// shape: a non-map document, a list or map where a value belongs, a model
// without name or path.
absl::StatusOr<RawConfig> LoadConfigFile(const std::string& path);

// Parses YAML text (`where` names it in errors); LoadConfigFile's core.
absl::StatusOr<RawConfig> ParseConfigText(const std::string& text,
                                          const std::string& where);

}  // namespace inferd

#endif  // INFERD_SERVICE_CONFIG_FILE_H_
