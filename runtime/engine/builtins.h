// RegisterBuiltins: registers every built-in entry of every registry kind
// (runtime/common/registry.h) — devices, config parsers, model classes,
// attention backends, model runners, tool-call and reasoning formats, and
// the engine's components, workflows and architectures. A process calls it
// once at start-up, before plug-ins load (LoadPlugins calls it too) and
// before any lookup; lookups never register anything. Idempotent and
// thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_BUILTINS_H_
#define INFERD_RUNTIME_ENGINE_BUILTINS_H_

namespace inferd {

void RegisterBuiltins();

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_BUILTINS_H_
