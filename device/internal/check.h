// Argument checks shared by the op entry points and kernels. Header-only.
#ifndef INFERD_DEVICE_INTERNAL_CHECK_H_
#define INFERD_DEVICE_INTERNAL_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "device/tensor.h"

#define INFERD_DEVICE_RETURN_IF_ERROR(expr)          \
  do {                                               \
    ::absl::Status inferd_dev_status_ = (expr);      \
    if (!inferd_dev_status_.ok()) return inferd_dev_status_; \
  } while (0)

namespace inferd {
namespace device_internal {

inline bool IsEmpty(const TensorView& t) { return t.data == nullptr; }

// 2-D with contiguous rows (strides[1] == 1, strides[0] >= cols).
inline absl::Status CheckMatrix(absl::string_view name, const TensorView& t,
                                DType dtype) {
  if (t.data == nullptr && t.rank == 2 && t.shape[0] * t.shape[1] == 0) {
    return absl::OkStatus();
  }
  if (t.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": null data"));
  }
  if (t.rank != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected a 2-D tensor, got ", t.DebugString()));
  }
  if (t.dtype != dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": expected ", DTypeName(dtype), ", got ", t.DebugString()));
  }
  if (t.shape[0] < 0 || t.shape[1] < 0 ||
      (t.shape[1] > 1 && t.strides[1] != 1) ||
      (t.shape[0] > 1 && t.strides[0] < t.shape[1])) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": rows must be contiguous with row stride >= width, got ",
        t.DebugString(), " strides [", t.strides[0], ", ", t.strides[1], "]"));
  }
  return absl::OkStatus();
}

inline absl::Status CheckShape2(absl::string_view name, const TensorView& t,
                                int64_t rows, int64_t cols) {
  if (t.shape[0] != rows || t.shape[1] != cols) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected shape [", rows, ", ", cols, "], got ",
                     t.DebugString()));
  }
  return absl::OkStatus();
}

// Contiguous 1-D of `len` elements (len < 0: any length).
inline absl::Status CheckVector(absl::string_view name, const TensorView& t,
                                DType dtype, int64_t len) {
  if (t.data == nullptr && len != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": null data"));
  }
  if (t.rank != 1 || t.dtype != dtype || (len >= 0 && t.shape[0] != len) ||
      (t.shape[0] > 1 && t.strides[0] != 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": expected contiguous ", DTypeName(dtype), "[",
        len >= 0 ? absl::StrCat(len) : std::string("n"), "], got ",
        t.DebugString()));
  }
  return absl::OkStatus();
}

// Row r of a 2-D view.
template <typename T>
inline T* Row(const TensorView& t, int64_t r) {
  return static_cast<T*>(t.data) + r * t.strides[0];
}

}  // namespace device_internal
}  // namespace inferd

#endif  // INFERD_DEVICE_INTERNAL_CHECK_H_
