// The built-in model runners: one registration call per device kind, each
// defined in its runner's own file. Explicit calls (no static registration
// objects) so that no runner is lost when the linker drops an unreferenced
// object file of the static library.
#include <mutex>

#include "runtime/model/cpu_model_runner.h"
#include "runtime/model/model_runner.h"

namespace inferd {

void RegisterBuiltinModelRunners() {
  static std::once_flag once;
  std::call_once(once, [] { RegisterCpuModelRunner(); });
}

}  // namespace inferd
