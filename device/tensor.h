// TensorView: a non-owning, pass-by-value view of a dense tensor on some
// device (dtype, shape, strides in elements, data pointer). Thread-compatible:
// a view is immutable; the memory it points at belongs to someone else.
#ifndef INFERD_DEVICE_TENSOR_H_
#define INFERD_DEVICE_TENSOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace inferd {

enum class DType : uint8_t { kF32, kF16, kBF16, kI32, kI64, kI8, kU8 };

// Size of one element in bytes.
size_t DTypeSize(DType dtype);
// "float32", "float16", "bfloat16", "int32", "int64", "int8", "uint8".
absl::string_view DTypeName(DType dtype);

inline constexpr int kMaxTensorRank = 4;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int rank = 0;
  std::array<int64_t, kMaxTensorRank> shape{};
  std::array<int64_t, kMaxTensorRank> strides{};  // in elements

  // Row-major contiguous view with the given shape.
  static TensorView Contiguous(void* data, DType dtype,
                               std::initializer_list<int64_t> shape);

  int64_t dim(int i) const { return shape[i < 0 ? rank + i : i]; }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }
  bool is_contiguous() const;

  template <typename T>
  T* as() const { return static_cast<T*>(data); }

  // "bfloat16[2048, 5632]".
  std::string DebugString() const;
};

}  // namespace inferd

#endif  // INFERD_DEVICE_TENSOR_H_
