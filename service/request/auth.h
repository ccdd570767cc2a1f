// API key authentication of inferd's calls: each front end finds the key a
// call presents (gRPC metadata `authorization: Bearer KEY` or `x-api-key:
// KEY`: grpc/grpc_auth.h; HTTP `Authorization: Bearer KEY`) and its
// CallScope checks it here, in constant time. grpc.health.v1, server
// reflection and the HTTP /health stay open (probes; the schema is the
// published API). Immutable after construction; thread-safe.
#ifndef INFERD_SERVICE_REQUEST_AUTH_H_
#define INFERD_SERVICE_REQUEST_AUTH_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace inferd {

class ApiKeyAuth {
 public:
  // An empty key disables the check (every call passes).
  explicit ApiKeyAuth(std::string key) : key_(std::move(key)) {}

  // The key from --api-key, or the trimmed content of --api-key-file.
  // INVALID_ARGUMENT when the file cannot be read or holds no key.
  static absl::StatusOr<std::string> LoadKey(const std::string& api_key,
                                             const std::string& api_key_file);

  bool enabled() const { return !key_.empty(); }

  // OK, or UNAUTHENTICATED saying what is missing or wrong; `how_to_send`
  // completes "missing API key: send ..." (each front end's way).
  absl::Status CheckKey(absl::string_view given,
                        absl::string_view how_to_send) const;

  // Constant-time equality: the time depends on the expected key's length
  // only, never on where the first difference is.
  static bool KeysEqual(absl::string_view expected, absl::string_view given);

 private:
  const std::string key_;
};

}  // namespace inferd

#endif  // INFERD_SERVICE_REQUEST_AUTH_H_
