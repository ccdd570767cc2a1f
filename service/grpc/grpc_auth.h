// The API key a gRPC call presents: metadata `authorization: Bearer KEY`
// (first) or `x-api-key: KEY`; its CallScope checks it (request/auth.h).
// Pure functions; thread-safe.
#ifndef INFERD_SERVICE_GRPC_GRPC_AUTH_H_
#define INFERD_SERVICE_GRPC_GRPC_AUTH_H_

#include <string>

#include "grpcpp/server_context.h"

namespace inferd {

// Completes "missing API key: send ..." for gRPC calls.
inline constexpr char kGrpcKeyHint[] =
    "metadata 'authorization: Bearer <key>' or 'x-api-key: <key>'";

// The key `ctx`'s call presents; empty when none.
std::string PresentedKey(const grpc::ServerContextBase& ctx);

}  // namespace inferd

#endif  // INFERD_SERVICE_GRPC_GRPC_AUTH_H_
