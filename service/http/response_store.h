// The Responses API's stored responses (`store`, `previous_response_id`,
// GET / DELETE /v1/responses/{id}): kept in this process, bounded by count,
// by bytes and by age (--responses-store-size, --responses-store-bytes,
// --responses-store-ttl); the least recently used one goes first. Each entry keeps the response object, its
// input items, and the conversation so far (what a follow-up that names it
// continues). Thread-safe. Not shared between replicas: behind a load
// balancer a follow-up must reach the same pod (session affinity) or send
// the whole conversation.
#ifndef INFERD_SERVICE_HTTP_RESPONSE_STORE_H_
#define INFERD_SERVICE_HTTP_RESPONSE_STORE_H_

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "runtime/chat/chat_template.h"

namespace inferd::http {

struct StoredResponse {
  nlohmann::ordered_json response;     // the response object
  nlohmann::ordered_json input_items;  // this request's input items
  // Every turn up to and with this response's output (instructions apart:
  // they do not carry over).
  std::vector<ChatMessage> conversation;
};

class ResponseStore {
 public:
  // `max_entries` 0 keeps nothing (store is then refused). `clock` tells
  // the time (tests set it).
  ResponseStore(size_t max_entries, size_t max_bytes, absl::Duration max_age,
                std::function<absl::Time()> clock = absl::Now)
      : max_entries_(max_entries), max_bytes_(max_bytes), max_age_(max_age),
        clock_(std::move(clock)) {}

  bool enabled() const { return max_entries_ > 0; }
  void Put(const std::string& id, StoredResponse entry);
  // Nothing when unknown, deleted, evicted or expired.
  std::optional<StoredResponse> Get(const std::string& id);
  bool Delete(const std::string& id);
  size_t size() const;
  // The entries' text, roughly what they hold in memory.
  size_t bytes() const;
  // An entry's size as the store counts it.
  static size_t SizeOf(const StoredResponse& entry);

 private:
  struct Entry {
    std::string id;
    std::shared_ptr<const StoredResponse> value;
    absl::Time stored;
    size_t bytes = 0;
  };
  void EraseLocked(std::list<Entry>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_entries_;
  const size_t max_bytes_;
  const absl::Duration max_age_;
  const std::function<absl::Time()> clock_;
  mutable absl::Mutex mu_;
  // Most recently used first.
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::list<Entry>::iterator> index_
      ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace inferd::http

#endif  // INFERD_SERVICE_HTTP_RESPONSE_STORE_H_
