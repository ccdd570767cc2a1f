// RETURN_IF_ERROR / ASSIGN_OR_RETURN: propagate absl::Status values.
// Header-only; no threading concerns.
#ifndef INFERD_RUNTIME_COMMON_STATUS_MACROS_H_
#define INFERD_RUNTIME_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define INFERD_CONCAT_INNER_(a, b) a##b
#define INFERD_CONCAT_(a, b) INFERD_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)                               \
  do {                                                      \
    ::absl::Status inferd_status_ = (expr);                 \
    if (!inferd_status_.ok()) return inferd_status_;        \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, StatusOrExpr())`: binds the value or returns the
// error status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  INFERD_ASSIGN_OR_RETURN_IMPL_(INFERD_CONCAT_(inferd_sor_, __LINE__), lhs, expr)

#define INFERD_ASSIGN_OR_RETURN_IMPL_(sor, lhs, expr) \
  auto sor = (expr);                                  \
  if (!sor.ok()) return std::move(sor).status();      \
  lhs = std::move(sor).value()

#endif  // INFERD_RUNTIME_COMMON_STATUS_MACROS_H_
