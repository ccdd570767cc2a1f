#include "runtime/engine/plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/chat/tool_parser.h"
#include "runtime/common/registry.h"
#include "runtime/engine/builtins.h"
#include "runtime/engine/plugin_api.h"
#include "runtime/loader/config_parser.h"

namespace inferd {
namespace {

// Registers into each kind's registry with the plug-in's path as origin.
class Registrar : public PluginRegistrar {
 public:
  explicit Registrar(std::string origin) : origin_(std::move(origin)) {}

  absl::Status AddInputProcessor(const std::string& name,
                                 const std::string& description,
                                 InputProcessorFactory factory) override {
    return Add(InputProcessors(), name, description, std::move(factory));
  }
  absl::Status AddOutputProcessor(const std::string& name,
                                  const std::string& description,
                                  OutputProcessorFactory factory) override {
    return Add(OutputProcessors(), name, description, std::move(factory));
  }
  absl::Status AddPrefillScheduler(const std::string& name,
                                   const std::string& description,
                                   PrefillSchedulerFactory factory) override {
    return Add(PrefillSchedulers(), name, description, std::move(factory));
  }
  absl::Status AddSampler(const std::string& name,
                          const std::string& description,
                          SamplerFactory factory) override {
    return Add(Samplers(), name, description, std::move(factory));
  }
  absl::Status AddBatchingScheduler(const std::string& name,
                                    const std::string& description,
                                    BatchingSchedulerFactory factory) override {
    return Add(BatchingSchedulers(), name, description, std::move(factory));
  }
  absl::Status AddAttentionBackend(
      const std::string& name, const std::string& description,
      AttentionBackendRegistration backend) override {
    if (!backend.create) return Empty(AttentionBackends(), name);
    return AttentionBackends().Add(name, description, std::move(backend),
                                   origin_);
  }
  absl::Status AddExecutor(const std::string& name,
                           const std::string& description,
                           ExecutorFactory factory) override {
    return Add(Executors(), name, description, std::move(factory));
  }
  absl::Status AddOutputStage(const std::string& name,
                              const std::string& description,
                              OutputStageFactory factory) override {
    return Add(OutputStages(), name, description, std::move(factory));
  }
  absl::Status AddTokenHead(const std::string& name,
                            const std::string& description,
                            TokenHeadFactory factory) override {
    return Add(TokenHeads(), name, description, std::move(factory));
  }
  absl::Status AddModelClass(const std::string& name,
                             const std::string& description,
                             ModelFactory factory) override {
    return Add(ModelClasses(), name, description, std::move(factory));
  }
  absl::Status AddToolParser(const std::string& name,
                             const std::string& description,
                             ToolParserFormat format) override {
    return RegisterToolParser(name, description, std::move(format), origin_);
  }
  absl::Status AddReasoningParser(const std::string& name,
                                  const std::string& description,
                                  ReasoningParserFormat format) override {
    return RegisterReasoningParser(name, description, std::move(format),
                                   origin_);
  }
  absl::Status AddRerankFormat(const std::string& name,
                               const std::string& description,
                               RerankFormat format) override {
    if (format.score_tokens.empty() || format.score_tokens.size() > 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rerank_format '", name, "' needs one or two score_tokens"));
    }
    return RerankFormats().Add(name, description, std::move(format), origin_);
  }
  absl::Status AddWorkflow(Workflow workflow) override {
    if (workflow.tasks.empty() || workflow.input_processor.empty() ||
        workflow.scheduler.empty() || workflow.attention_backend.empty() ||
        workflow.output_processor.empty() || workflow.executor.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "workflow '", workflow.name,
          "' needs tasks and every component name (input_processor, "
          "scheduler, attention_backend, output_processor, executor)"));
    }
    const std::string name = workflow.name;
    std::string description = workflow.description;
    return Workflows().Add(name, std::move(description), std::move(workflow),
                           origin_);
  }
  absl::Status AddArchitecture(const std::string& architecture,
                               const std::string& description,
                               ArchitectureSpec spec) override {
    if (spec.default_workflow.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "architecture '", architecture, "' needs a default_workflow"));
    }
    return Architectures().Add(architecture, description, std::move(spec),
                               origin_);
  }
  absl::Status AddConfigParser(const std::string& model_type,
                               const std::string& description,
                               ConfigParser parser) override {
    return ::inferd::AddConfigParser(model_type, description,
                                     std::move(parser), origin_);
  }
  absl::StatusOr<ConfigParser> GetConfigParser(
      const std::string& model_type) override {
    return FindConfigParser(model_type);
  }

 private:
  template <typename T>
  absl::Status Empty(const Registry<T>& registry, const std::string& name) {
    return absl::InvalidArgumentError(absl::StrCat(
        registry.kind(), " '", name, "' was registered without a factory"));
  }
  // Every factory kind: refuses an empty factory.
  template <typename T>
  absl::Status Add(Registry<T>& registry, const std::string& name,
                   const std::string& description, T factory) {
    if (!factory) return Empty(registry, name);
    return registry.Add(name, description, std::move(factory), origin_);
  }

  const std::string origin_;
};

absl::Status Refuse(const std::string& path, absl::string_view why) {
  return absl::FailedPreconditionError(
      absl::StrCat("--plugin ", path, ": ", why));
}

}  // namespace

absl::Status LoadPlugin(const std::string& path) {
  // Built-ins first: a plug-in cannot take one of their names.
  RegisterBuiltins();
  // The same file loaded twice (e.g. two servers in one process) registers
  // once.
  static absl::Mutex mu(absl::kConstInit);
  static auto* loaded = new std::set<std::string>();
  char resolved[PATH_MAX];
  const std::string key =
      realpath(path.c_str(), resolved) != nullptr ? resolved : path;
  absl::MutexLock lock(&mu);
  if (loaded->count(key) > 0) return absl::OkStatus();
  // RTLD_LOCAL: plug-ins do not see each other's symbols; RTLD_NOW: a
  // missing symbol fails here, not at the first call.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Refuse(path, absl::StrCat("cannot load it (",
                                     err != nullptr ? err : "unknown error",
                                     "); give the path of a built .so"));
  }
  using VersionFn = int (*)();
  using RegisterFn = void (*)(PluginRegistrar*, absl::Status*);
  auto version =
      reinterpret_cast<VersionFn>(dlsym(handle, "inferd_plugin_api_version"));
  auto register_fn =
      reinterpret_cast<RegisterFn>(dlsym(handle, "inferd_plugin_register"));
  if (version == nullptr || register_fn == nullptr) {
    return Refuse(path,
                  "not an inferd plug-in (it exports no "
                  "inferd_plugin_api_version / inferd_plugin_register; "
                  "define them with INFERD_PLUGIN from "
                  "runtime/engine/plugin_api.h)");
  }
  const int got = version();
  if (got != INFERD_PLUGIN_API_VERSION) {
    return Refuse(path, absl::StrCat(
                            "built against plug-in API version ", got,
                            "; this inferd provides version ",
                            INFERD_PLUGIN_API_VERSION,
                            ". Rebuild the plug-in against this inferd's "
                            "runtime/engine/plugin_api.h"));
  }
  Registrar registrar(path);
  absl::Status status;
  register_fn(&registrar, &status);
  if (!status.ok()) {
    return Refuse(path, absl::StrCat("its registration failed: ",
                                     status.message()));
  }
  // Never dlclose: its factories are registered for the process's life.
  loaded->insert(key);
  return absl::OkStatus();
}

absl::Status LoadPlugins(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) {
    absl::Status s = LoadPlugin(p);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string ListComponents() {
  RegisterBuiltins();
  std::string out;
  for (const RegistryKind* kind : RegistryKind::All()) {
    absl::StrAppend(&out, out.empty() ? "" : "\n", kind->kind(), ": ",
                    kind->summary(), "\n");
    for (const RegistryListing& e : kind->List()) {
      absl::StrAppend(
          &out, "  ", e.name,
          e.origin == "builtin" ? "" : absl::StrCat(" [", e.origin, "]"),
          e.description.empty() ? "" : absl::StrCat(" - ", e.description),
          "\n");
    }
  }
  return out;
}

}  // namespace inferd
