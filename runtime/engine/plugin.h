// Loading plug-ins (runtime/engine/plugin_api.h) into the registries.
// Call from the startup thread before any model is created; LoadPlugin
// registers the built-ins first (RegisterBuiltins) so that a plug-in cannot
// take their names. Loaded libraries are never unloaded (their
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

// Every registry kind as text (RegistryKind::All): the kind and what it is,
// then one line per entry with its origin when not built-in.
std::string ListComponents();

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_PLUGIN_H_
