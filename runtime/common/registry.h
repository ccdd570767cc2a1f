// Registries: inferd's named, swappable parts, one typed table per kind —
// devices, config parsers, model classes, attention backends, model runners,
// tool-call formats, reasoning parsers, architectures, workflows and the
// components a workflow is assembled from (input processors, prefill and
// batching schedulers, output processors, samplers, output stages, token
// heads, executors).
//
// Each kind is one `Registry<T>` owned by the layer that defines T, reached
// through that layer's accessor (e.g. `Workflows()` in runtime/engine/
// workflow.h). An entry has a name unique within its kind, a one-line
// description, its origin ("builtin" or the plug-in that added it) and a
// value of type T (usually a factory). Built-ins are registered once at
// start-up by `RegisterBuiltins()` (runtime/engine/builtins.h; each layer has
// its own Register*Builtins for tools that link only that layer), before
// plug-ins load (runtime/engine/plugin.h); lookups never register anything.
// Entries are never removed, so pointers returned by Find stay valid.
// Thread-safe.
#ifndef INFERD_RUNTIME_COMMON_REGISTRY_H_
#define INFERD_RUNTIME_COMMON_REGISTRY_H_

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

// One entry without its value (for listings).
struct RegistryListing {
  std::string kind, name, description, origin;
};

// What every kind's registry offers whatever its value type: names,
// listings, and the catalog of every kind (--list-components).
class RegistryKind {
 public:
  RegistryKind(const RegistryKind&) = delete;
  RegistryKind& operator=(const RegistryKind&) = delete;
  // Leaves All() (the process's registries live forever; a test's local
  // one does not).
  virtual ~RegistryKind();

  const std::string& kind() const { return kind_; }
  // What the kind is, one line.
  const std::string& summary() const { return summary_; }

  bool Contains(absl::string_view name) const;
  // Sorted.
  std::vector<std::string> Names() const;
  // Sorted by name.
  std::vector<RegistryListing> List() const;

  // Every kind's registry created in this process, sorted by kind.
  static std::vector<const RegistryKind*> All();

 protected:
  struct Meta {
    std::string description;
    std::string origin;
  };
  // Adds itself to All().
  RegistryKind(std::string kind, std::string summary);
  // ALREADY_EXISTS (naming both origins) when `name` is taken,
  // INVALID_ARGUMENT for an empty name; else records it and returns OK.
  absl::Status Reserve(const std::string& name, Meta meta)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string NotFound(absl::string_view name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;

 private:
  const std::string kind_;
  const std::string summary_;
  std::map<std::string, Meta, std::less<>> meta_ ABSL_GUARDED_BY(mu_);
};

template <typename T>
class Registry final : public RegistryKind {
 public:
  Registry(std::string kind, std::string summary)
      : RegistryKind(std::move(kind), std::move(summary)) {}

  // ALREADY_EXISTS naming both origins when `name` is taken (built-ins
  // cannot be replaced); INVALID_ARGUMENT for an empty name.
  absl::Status Add(const std::string& name, std::string description, T value,
                   std::string origin = "builtin") {
    absl::MutexLock lock(&mu_);
    absl::Status s = Reserve(
        name, Meta{std::move(description),
                   origin.empty() ? std::string("builtin") : std::move(origin)});
    if (!s.ok()) return s;
    values_.emplace(name, std::make_unique<T>(std::move(value)));
    return absl::OkStatus();
  }

  // The value, or null. The pointer stays valid for the process's life.
  const T* Find(absl::string_view name) const {
    absl::MutexLock lock(&mu_);
    auto it = values_.find(name);
    return it == values_.end() ? nullptr : it->second.get();
  }

  // A copy of the value; NOT_FOUND naming the kind and listing its names.
  absl::StatusOr<T> Get(absl::string_view name) const {
    absl::MutexLock lock(&mu_);
    auto it = values_.find(name);
    if (it == values_.end()) return absl::NotFoundError(NotFound(name));
    return *it->second;
  }

 private:
  std::map<std::string, std::unique_ptr<const T>, std::less<>> values_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_COMMON_REGISTRY_H_
