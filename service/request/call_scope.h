// The call kit: what every call of both front ends needs, written once. A
// CallScope lives as long as its call (a gRPC reactor, an HTTP route with
// its streamed body): while it lives the call counts as active (the drain
// waits for active calls), Admit checks the API key and that the server
// still takes work, and when it ends it reports the call's outcome (route,
// model, status, seconds) to the observer.
//
// Not thread-safe: the call that owns it serializes its use.
#ifndef INFERD_SERVICE_REQUEST_CALL_SCOPE_H_
#define INFERD_SERVICE_REQUEST_CALL_SCOPE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/request/auth.h"
#include "service/request/request_layer.h"

namespace inferd {

class CallScope {
 public:
  enum class Kind {
    kWork,   // submits work: counted active, refused while draining
    kQuery,  // reads the server's state (model listing): neither
  };

  // `requests` must outlive the scope.
  CallScope(RequestLayer* requests, std::string rpc, Kind kind = Kind::kWork);
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

  // OK when the call may go on: the key the client presented matches
  // (`auth` may be null: no key; `how_to_send` completes "missing API key:
  // send ..."), and for kWork the server is not draining. A refusal is
  // recorded as the call's outcome.
  absl::Status Admit(const ApiKeyAuth* auth, absl::string_view presented_key,
                     absl::string_view how_to_send);

  void set_model(absl::string_view model) { model_ = std::string(model); }
  // The call's outcome (the last one set is reported).
  void set_status(const absl::Status& status) { status_ = status; }
  const absl::Status& status() const { return status_; }
  const std::string& rpc() const { return rpc_; }

 private:
  RequestLayer* const requests_;
  const std::string rpc_;
  const Kind kind_;
  const absl::Time start_;
  std::string model_;
  absl::Status status_;
};

}  // namespace inferd

#endif  // INFERD_SERVICE_REQUEST_CALL_SCOPE_H_
