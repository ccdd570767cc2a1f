#include "runtime/common/registry.h"

#include <algorithm>

namespace inferd {
namespace {

struct Catalog {
  absl::Mutex mu;
  std::vector<const RegistryKind*> kinds ABSL_GUARDED_BY(mu);
};

Catalog& GetCatalog() {
  static Catalog* const catalog = new Catalog();
  return *catalog;
}

}  // namespace

RegistryKind::RegistryKind(std::string kind, std::string summary)
    : kind_(std::move(kind)), summary_(std::move(summary)) {
  Catalog& c = GetCatalog();
  absl::MutexLock lock(&c.mu);
  c.kinds.push_back(this);
}

RegistryKind::~RegistryKind() {
  Catalog& c = GetCatalog();
  absl::MutexLock lock(&c.mu);
  c.kinds.erase(std::remove(c.kinds.begin(), c.kinds.end(), this),
                c.kinds.end());
}

std::vector<const RegistryKind*> RegistryKind::All() {
  Catalog& c = GetCatalog();
  absl::MutexLock lock(&c.mu);
  std::vector<const RegistryKind*> out = c.kinds;
  std::sort(out.begin(), out.end(),
            [](const RegistryKind* a, const RegistryKind* b) {
              return a->kind() < b->kind();
            });
  return out;
}

bool RegistryKind::Contains(absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  return meta_.find(name) != meta_.end();
}

std::vector<std::string> RegistryKind::Names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  out.reserve(meta_.size());
  for (const auto& [name, meta] : meta_) out.push_back(name);
  return out;  // std::map order: sorted
}

std::vector<RegistryListing> RegistryKind::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<RegistryListing> out;
  out.reserve(meta_.size());
  for (const auto& [name, meta] : meta_) {
    out.push_back({kind_, name, meta.description, meta.origin});
  }
  return out;
}

absl::Status RegistryKind::Reserve(const std::string& name, Meta meta) {
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", kind_, " needs a non-empty name"));
  }
  auto it = meta_.find(name);
  if (it != meta_.end()) {
    return absl::AlreadyExistsError(absl::StrCat(
        kind_, " '", name, "' from ", meta.origin,
        " is already registered by ", it->second.origin,
        "; names must be unique (pick another name)"));
  }
  meta_.emplace(name, std::move(meta));
  return absl::OkStatus();
}

std::string RegistryKind::NotFound(absl::string_view name) const {
  if (meta_.empty()) {
    return absl::StrCat("no ", kind_, " named '", name,
                        "' is registered, and none at all: the process did "
                        "not register inferd's built-ins (call "
                        "inferd::RegisterBuiltins() at start-up)");
  }
  std::vector<std::string> names;
  for (const auto& [n, meta] : meta_) names.push_back(n);
  return absl::StrCat("no ", kind_, " named '", name,
                      "' is registered; registered: ",
                      absl::StrJoin(names, ", "));
}

}  // namespace inferd
