#include "service/request/call_scope.h"

#include "absl/time/clock.h"

namespace inferd {

CallScope::CallScope(RequestLayer* requests, std::string rpc, Kind kind)
    : requests_(requests),
      rpc_(std::move(rpc)),
      kind_(kind),
      start_(absl::Now()) {
  if (kind_ == Kind::kWork) requests_->active_counter().fetch_add(1);
}

CallScope::~CallScope() {
  if (kind_ == Kind::kWork) requests_->active_counter().fetch_sub(1);
  if (RpcObserver* observer = requests_->observer(); observer != nullptr) {
    observer->OnRpcDone(rpc_, model_, status_,
                        absl::ToDoubleSeconds(absl::Now() - start_));
  }
}

absl::Status CallScope::Admit(const ApiKeyAuth* auth,
                              absl::string_view presented_key,
                              absl::string_view how_to_send) {
  absl::Status s = auth == nullptr
                       ? absl::OkStatus()
                       : auth->CheckKey(presented_key, how_to_send);
  if (s.ok() && kind_ == Kind::kWork) s = requests_->CheckAccepting();
  if (!s.ok()) status_ = s;
  return s;
}

}  // namespace inferd
