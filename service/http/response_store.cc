#include "service/http/response_store.h"

#include <utility>

#include "absl/time/clock.h"

namespace inferd::http {

void ResponseStore::ExpireLocked(absl::Time now) {
  // Oldest entries sit at the back only by use, not by age: scan them all
  // (the store is small and bounded).
  for (auto it = lru_.begin(); it != lru_.end();) {
    if (now - it->stored > max_age_) {
      index_.erase(it->id);
      it = lru_.erase(it);
    } else {
      ++it;
    }
  }
}

void ResponseStore::Put(const std::string& id, StoredResponse entry) {
  if (max_entries_ == 0) return;
  auto value = std::make_shared<const StoredResponse>(std::move(entry));
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  ExpireLocked(now);
  if (auto it = index_.find(id); it != index_.end()) {
    lru_.erase(it->second);
    index_.erase(it);
  }
  lru_.push_front(Entry{id, std::move(value), now});
  index_[id] = lru_.begin();
  while (lru_.size() > max_entries_) {
    index_.erase(lru_.back().id);
    lru_.pop_back();
  }
}

std::optional<StoredResponse> ResponseStore::Get(const std::string& id) {
  std::shared_ptr<const StoredResponse> value;
  {
    absl::MutexLock lock(&mu_);
    ExpireLocked(absl::Now());
    auto it = index_.find(id);
    if (it == index_.end()) return std::nullopt;
    lru_.splice(lru_.begin(), lru_, it->second);
    value = lru_.front().value;
  }
  return *value;
}

bool ResponseStore::Delete(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  lru_.erase(it->second);
  index_.erase(it);
  return true;
}

size_t ResponseStore::size() const {
  absl::MutexLock lock(&mu_);
  return lru_.size();
}

}  // namespace inferd::http
