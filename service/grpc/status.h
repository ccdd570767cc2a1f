// The one place absl::Status becomes grpc::Status (ARCHITECTURE.md "Errors").
// Pure function; thread-safe.
#ifndef INFERD_SERVICE_GRPC_STATUS_H_
#define INFERD_SERVICE_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace inferd {

// Codes carry over one to one (absl's codes are gRPC's); the message is
// kept. An OK status maps to grpc::Status::OK.
grpc::Status ToGrpcStatus(const absl::Status& status);
// The reverse (a gRPC call's outcome, for the front-end-neutral observer).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace inferd

#endif  // INFERD_SERVICE_GRPC_STATUS_H_
