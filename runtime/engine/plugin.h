// Loading plug-ins (runtime/engine/plugin_api.h) into the registry.
// Call from the startup thread, after RegisterBuiltinComponents and before
// any model is created. Loaded libraries are never unloaded (their
// factories stay registered for the process's life).
#ifndef INFERD_RUNTIME_ENGINE_PLUGIN_H_
#define INFERD_RUNTIME_ENGINE_PLUGIN_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace inferd {

// Loads `path` and runs its registration. FAILED_PRECONDITION naming the
// path and what to do when the file cannot be loaded, is not an inferd
// plug-in, was built against another plug-in API version, or its
// registration fails (e.g. a name already taken).
absl::Status LoadPlugin(const std::string& path);

// LoadPlugin for each path, in order; the first error stops.
absl::Status LoadPlugins(const std::vector<std::string>& paths);

// The registry as text: one line per entry, grouped by kind.
std::string ListComponents();

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_PLUGIN_H_
