// A plug-in built "against another API version": inferd must refuse it at
// startup with a message naming both versions (plugin_integration_test.py).
#include "runtime/engine/plugin_api.h"

extern "C" __attribute__((visibility("default"))) int
inferd_plugin_api_version() {
  return INFERD_PLUGIN_API_VERSION + 1;
}

extern "C" __attribute__((visibility("default"))) void inferd_plugin_register(
    inferd::PluginRegistrar* registrar, absl::Status* status) {
  (void)registrar;
  *status = absl::InternalError("a plug-in of another version ran");
}
