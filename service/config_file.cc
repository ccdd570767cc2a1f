#include "service/config_file.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace inferd {
namespace {

absl::Status Bad(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("--config ", where, ": ", what));
}

// A scalar as text; false for a list or a map. Null leaves `out` empty and
// sets `null`.
bool ScalarText(const YAML::Node& node, std::string* out, bool* null) {
  *null = node.IsNull();
  if (*null) return true;
  if (!node.IsScalar()) return false;
  *out = node.Scalar();
  return true;
}

absl::StatusOr<RawConfig> Convert(const YAML::Node& root,
                                  const std::string& where) {
  RawConfig config;
  if (root.IsNull()) return config;  // an empty file
  if (!root.IsMap()) {
    return Bad(where, "expected a map of settings (flag names without the "
                      "dashes, e.g. `listen: 0.0.0.0:50051`, and `models:`)");
  }
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& value = kv.second;
    if (key == "models") {
      if (value.IsNull()) continue;
      if (!value.IsSequence()) {
        return Bad(where, "'models' must be a list of {name, path, ...}");
      }
      for (size_t i = 0; i < value.size(); ++i) {
        const YAML::Node& m = value[i];
        RawConfigModel model;
        model.where = absl::StrCat(where, ": models[", i, "]");
        if (!m.IsMap()) {
          return Bad(where, absl::StrCat("models[", i,
                                         "] must be a map with name and path"));
        }
        for (const auto& mkv : m) {
          const std::string mkey = mkv.first.as<std::string>();
          std::string text;
          bool null = false;
          if (!ScalarText(mkv.second, &text, &null)) {
            return Bad(where, absl::StrCat("models[", i, "].", mkey,
                                           " must be a single value"));
          }
          if (null) continue;
          if (mkey == "name") {
            model.name = text;
          } else if (mkey == "path") {
            model.path = text;
          } else {
            model.options.emplace_back(mkey, text);
          }
        }
        if (model.name.empty() || model.path.empty()) {
          return Bad(where, absl::StrCat("models[", i,
                                         "] needs both name and path"));
        }
        config.models.push_back(std::move(model));
      }
      continue;
    }
    if (key == "plugins" || key == "plugin") {
      if (value.IsNull()) continue;
      std::string text;
      bool null = false;
      if (value.IsSequence()) {
        for (size_t i = 0; i < value.size(); ++i) {
          if (!ScalarText(value[i], &text, &null) || null) {
            return Bad(where, absl::StrCat(key, "[", i, "] must be a path"));
          }
          config.plugins.push_back(text);
        }
      } else if (ScalarText(value, &text, &null)) {
        config.plugins.push_back(text);
      }
      continue;
    }
    std::string text;
    bool null = false;
    if (!ScalarText(value, &text, &null)) {
      return Bad(where, absl::StrCat("'", key, "' must be a single value, not "
                                     "a list or a map"));
    }
    if (!null) config.scalars.emplace_back(key, text);
  }
  return config;
}

}  // namespace

absl::StatusOr<RawConfig> ParseConfigText(const std::string& text,
                                          const std::string& where) {
  // yaml-cpp reports errors by exception; none leaves this function.
  try {
    return Convert(YAML::Load(text), where);
  } catch (const YAML::Exception& e) {
    return Bad(where, absl::StrCat("line ", e.mark.line + 1, ", column ",
                                   e.mark.column + 1, ": ", e.msg));
  }
}

absl::StatusOr<RawConfig> LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Bad(path, "cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseConfigText(ss.str(), path);
}

}  // namespace inferd
