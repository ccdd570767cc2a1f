// API key authentication of inferd's RPCs: a call must carry
// `authorization: Bearer KEY` or `x-api-key: KEY` metadata. The key is
// compared in constant time. grpc.health.v1 and server reflection stay open
// (probes, and the schema is the published API); every inferd.v1 RPC is
// checked. Immutable after construction; thread-safe.
#ifndef INFERD_SERVICE_AUTH_H_
#define INFERD_SERVICE_AUTH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"

namespace inferd {

// How a gRPC call presents its key (completes "missing API key: send ...").
inline constexpr char kGrpcKeyHint[] =
    "metadata 'authorization: Bearer <key>' or 'x-api-key: <key>'";

class ApiKeyAuth {
 public:
  // An empty key disables the check (every call passes).
  explicit ApiKeyAuth(std::string key) : key_(std::move(key)) {}

  // The key from --api-key, or the trimmed content of --api-key-file.
  // INVALID_ARGUMENT when the file cannot be read or holds no key.
  static absl::StatusOr<std::string> LoadKey(const std::string& api_key,
                                             const std::string& api_key_file);

  bool enabled() const { return !key_.empty(); }

  // OK, or UNAUTHENTICATED saying what is missing or wrong.
  absl::Status Check(const grpc::ServerContextBase& ctx) const;
  // The same for a key presented another way (the HTTP API's bearer
  // token); `how_to_send` completes "missing API key: send ...".
  absl::Status CheckKey(absl::string_view given,
                        absl::string_view how_to_send) const;

  // The key a call presents (Bearer token first, then x-api-key); empty when
  // none. Exposed for tests.
  static std::string PresentedKey(const grpc::ServerContextBase& ctx);

  // Constant-time equality: the time depends on the expected key's length
  // only, never on where the first difference is.
  static bool KeysEqual(absl::string_view expected, absl::string_view given);

 private:
  const std::string key_;
};

}  // namespace inferd

#endif  // INFERD_SERVICE_AUTH_H_
