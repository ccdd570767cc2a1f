#include "service/grpc/status.h"

#include "gtest/gtest.h"

namespace inferd {
namespace {

TEST(StatusMappingTest, MapsEveryEdgeCodeAndKeepsTheMessage) {
  struct Case {
    absl::Status in;
    grpc::StatusCode want;
  } cases[] = {
      {absl::InvalidArgumentError("bad"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::ResourceExhaustedError("full"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::UnavailableError("loading"), grpc::StatusCode::UNAVAILABLE},
      {absl::DeadlineExceededError("late"), grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::NotFoundError("who"), grpc::StatusCode::NOT_FOUND},
      {absl::CancelledError("bye"), grpc::StatusCode::CANCELLED},
      {absl::UnimplementedError("todo"), grpc::StatusCode::UNIMPLEMENTED},
      {absl::FailedPreconditionError("task"), grpc::StatusCode::FAILED_PRECONDITION},
      {absl::UnauthenticatedError("key"), grpc::StatusCode::UNAUTHENTICATED},
      {absl::InternalError("oops"), grpc::StatusCode::INTERNAL},
  };
  for (const Case& c : cases) {
    grpc::Status g = ToGrpcStatus(c.in);
    EXPECT_EQ(g.error_code(), c.want) << c.in;
    EXPECT_EQ(g.error_message(), std::string(c.in.message()));
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace inferd
