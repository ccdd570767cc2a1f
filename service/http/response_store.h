// The Responses API's stored responses (`store`, `previous_response_id`,
// GET / DELETE /v1/responses/{id}): kept in this process, bounded by count
// and by age (--responses-store-size, --responses-store-ttl); the least
// recently used one goes first. Each entry keeps the response object, its
// input items, and the conversation so far (what a follow-up that names it
// continues). Thread-safe. Not shared between replicas: behind a load
// balancer a follow-up must reach the same pod (session affinity) or send
// the whole conversation.
#ifndef INFERD_SERVICE_HTTP_RESPONSE_STORE_H_
#define INFERD_SERVICE_HTTP_RESPONSE_STORE_H_

#include <cstddef>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/synchronization/mutex.h"
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
  // `max_entries` 0 keeps nothing (store is then refused).
  ResponseStore(size_t max_entries, absl::Duration max_age)
      : max_entries_(max_entries), max_age_(max_age) {}

  bool enabled() const { return max_entries_ > 0; }
  void Put(const std::string& id, StoredResponse entry);
  // Nothing when unknown, deleted, evicted or expired.
  std::optional<StoredResponse> Get(const std::string& id);
  bool Delete(const std::string& id);
  size_t size() const;

 private:
  struct Entry {
    std::string id;
    std::shared_ptr<const StoredResponse> value;
    absl::Time stored;
  };
  void ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_entries_;
  const absl::Duration max_age_;
  mutable absl::Mutex mu_;
  // Most recently used first.
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, std::list<Entry>::iterator> index_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace inferd::http

#endif  // INFERD_SERVICE_HTTP_RESPONSE_STORE_H_
