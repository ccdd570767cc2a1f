#include "runtime/common/registry.h"

namespace inferd {

Registry& Registry::Global() {
  static Registry* const registry = new Registry();
  return *registry;
}

absl::Status Registry::Add(Entry entry) {
  if (entry.kind.empty() || entry.name.empty()) {
    return absl::InvalidArgumentError(
        "a registry entry needs a kind and a name");
  }
  if (entry.origin.empty()) entry.origin = "builtin";
  absl::MutexLock lock(&mu_);
  auto key = std::make_pair(entry.kind, entry.name);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    return absl::AlreadyExistsError(absl::StrCat(
        entry.kind, " '", entry.name, "' from ", entry.origin,
        " is already registered by ", it->second->origin,
        "; names must be unique (pick another name)"));
  }
  entries_.emplace(std::move(key), std::make_unique<Entry>(std::move(entry)));
  return absl::OkStatus();
}

const Registry::Entry* Registry::Find(absl::string_view kind,
                                      absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(std::make_pair(std::string(kind), std::string(name)));
  return it == entries_.end() ? nullptr : it->second.get();
}

std::vector<std::string> Registry::Names(absl::string_view kind) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [key, entry] : entries_) {
    if (key.first == kind) out.push_back(key.second);
  }
  return out;  // std::map order: sorted
}

std::vector<Registry::Listing> Registry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<Listing> out;
  for (const auto& [key, e] : entries_) {
    out.push_back({e->kind, e->name, e->description, e->origin});
  }
  return out;
}

}  // namespace inferd
