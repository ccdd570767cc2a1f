#include "service/http/response_store.h"

#include <utility>

namespace inferd::http {

size_t ResponseStore::SizeOf(const StoredResponse& e) {
  size_t n = e.response.dump().size() + e.input_items.dump().size();
  for (const ChatMessage& m : e.conversation) {
    n += m.content.size() + m.reasoning_content.size() + 64;
    for (const ChatToolCall& c : m.tool_calls) {
      n += c.id.size() + c.name.size() + c.arguments.size();
    }
  }
  return n;
}

void ResponseStore::EraseLocked(std::list<Entry>::iterator it) {
  bytes_ -= it->bytes;
  index_.erase(it->id);
  lru_.erase(it);
}

void ResponseStore::ExpireLocked(absl::Time now) {
  // Use order is not age order: look at every entry (the store is
  // bounded).
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if (now - it->stored > max_age_) EraseLocked(it);
    it = next;
  }
}

void ResponseStore::Put(const std::string& id, StoredResponse entry) {
  if (max_entries_ == 0) return;
  const size_t bytes = SizeOf(entry);
  if (bytes > max_bytes_) return;  // larger than the whole store
  auto value = std::make_shared<const StoredResponse>(std::move(entry));
  const absl::Time now = clock_();
  absl::MutexLock lock(&mu_);
  ExpireLocked(now);
  if (auto it = index_.find(id); it != index_.end()) EraseLocked(it->second);
  lru_.push_front(Entry{id, std::move(value), now, bytes});
  index_[id] = lru_.begin();
  bytes_ += bytes;
  while (lru_.size() > max_entries_ || bytes_ > max_bytes_) {
    EraseLocked(std::prev(lru_.end()));
  }
}

std::optional<StoredResponse> ResponseStore::Get(const std::string& id) {
  std::shared_ptr<const StoredResponse> value;
  {
    absl::MutexLock lock(&mu_);
    ExpireLocked(clock_());
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
  EraseLocked(it->second);
  return true;
}

size_t ResponseStore::size() const {
  absl::MutexLock lock(&mu_);
  return lru_.size();
}

size_t ResponseStore::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace inferd::http
