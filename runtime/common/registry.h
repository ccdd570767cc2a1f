// Registry: the process-wide table of inferd's named, swappable parts —
// config parsers, architectures, model classes, workflows and the components a
// workflow is assembled from (input processors, schedulers, attention backends,
// output processors, executors), and the model runner of each device kind. Each
// entry has a kind, a name unique within its kind, a one-line description,
// its origin ("builtin" or the plug-in that added it) and a typed value
// (usually a factory). Each layer defines the value types of its kinds and
// registers its built-ins; plug-ins add more at startup
// (runtime/engine/plugin.h). Entries are never removed, so pointers
// returned by Find stay valid. Thread-safe.
#ifndef INFERD_RUNTIME_COMMON_REGISTRY_H_
#define INFERD_RUNTIME_COMMON_REGISTRY_H_

#include <any>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace inferd {

// The kinds inferd itself uses.
namespace registry_kind {
inline constexpr char kArchitecture[] = "architecture";
// config.json's model_type -> its ConfigParser (runtime/loader/
// config_parser.h): the family's defaults and rules.
inline constexpr char kConfigParser[] = "config_parser";
inline constexpr char kModel[] = "model";
inline constexpr char kWorkflow[] = "workflow";
inline constexpr char kInputProcessor[] = "input_processor";
inline constexpr char kScheduler[] = "scheduler";
inline constexpr char kAttentionBackend[] = "attention_backend";
inline constexpr char kOutputProcessor[] = "output_processor";
// The prefill tail after the output processor (runtime/engine/
// output_stages.h): dense, matryoshka, normalize, scores.
inline constexpr char kOutputStage[] = "output_stage";
// Embed outputs from every token's hidden state (runtime/engine/
// token_heads.h): bge_m3_sparse, bge_m3_colbert.
inline constexpr char kTokenHead[] = "token_head";
inline constexpr char kExecutor[] = "executor";
// A device kind ("cpu") -> the ModelRunnerFactory of its model runner
// (runtime/model/model_runner.h).
inline constexpr char kModelRunner[] = "model_runner";
}  // namespace registry_kind

class Registry {
 public:
  struct Entry {
    std::string kind;
    std::string name;
    std::string description;
    std::string origin;  // "builtin" or a plug-in's path
    std::any value;
  };

  // The process's registry.
  static Registry& Global();

  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // ALREADY_EXISTS (naming both origins) when `kind`/`name` is taken;
  // INVALID_ARGUMENT for an empty kind or name.
  absl::Status Add(Entry entry);

  // The entry, or null.
  const Entry* Find(absl::string_view kind, absl::string_view name) const;

  // The value of `kind`/`name` as a T. NOT_FOUND listing the names of that
  // kind when absent; INVALID_ARGUMENT when the entry holds another type
  // (e.g. a scheduler of another interface than the caller needs).
  template <typename T>
  absl::StatusOr<T> Get(absl::string_view kind, absl::string_view name) const {
    const Entry* e = Find(kind, name);
    if (e == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          "no ", kind, " named '", name, "' is registered; registered: ",
          Names(kind).empty() ? std::string("none")
                              : absl::StrJoin(Names(kind), ", ")));
    }
    const T* value = std::any_cast<T>(&e->value);
    if (value == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          kind, " '", name, "' (", e->origin,
          ") does not provide the interface this caller needs"));
    }
    return *value;
  }

  // Names of `kind`, sorted.
  std::vector<std::string> Names(absl::string_view kind) const;
  // Every entry (without values), sorted by kind then name.
  struct Listing {
    std::string kind, name, description, origin;
  };
  std::vector<Listing> List() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Entry>>
      entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_COMMON_REGISTRY_H_
