// A plug-in built "against another API version" (version 1, the API before
// full config parsers): inferd must refuse it at startup with a message
// naming both versions (plugin_integration_test.py).
#include "runtime/engine/plugin_api.h"

extern "C" __attribute__((visibility("default"))) int
inferd_plugin_api_version() {
  static_assert(INFERD_PLUGIN_API_VERSION != 1,
                "the wrong version must differ from the current one");
  return 1;
}

extern "C" __attribute__((visibility("default"))) void inferd_plugin_register(
    inferd::PluginRegistrar* registrar, absl::Status* status) {
  (void)registrar;
  *status = absl::InternalError("a plug-in of another version ran");
}
