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

// The block-quantized dtypes hold ggml's block layouts (see device/quant.h):
// a run of DTypeBlockElements() values is stored as DTypeBlockBytes() bytes.
// A quantized tensor is a weight: rank 2 [N, K] in elements, K a multiple of
// the block size, N rows of DTypeRowBytes(dtype, K) bytes, contiguous,
// nominal strides {K, 1}.
enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kI32,
  kI64,
  kI8,
  kU8,
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ4_K,
  kQ6_K,
  kQ5_0,
  kQ5_1,
};

// Size of one element in bytes; 0 for block-quantized dtypes (their size is
// per block: DTypeBlockBytes).
size_t DTypeSize(DType dtype);
// "float32", "float16", "bfloat16", "int32", "int64", "int8", "uint8",
// "q8_0", "q4_0", "q4_1", "q4_k", "q6_k", "q5_0", "q5_1".
absl::string_view DTypeName(DType dtype);

// Whether values are stored in ggml blocks (kQ8_0 .. kQ5_1).
bool IsBlockQuantized(DType dtype);
// Values per block: 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), 256 (Q4_K, Q6_K), 1
// otherwise.
int64_t DTypeBlockElements(DType dtype);
// Bytes per block (DTypeSize for the plain dtypes).
size_t DTypeBlockBytes(DType dtype);
// Bytes of `cols` values (cols a multiple of DTypeBlockElements).
size_t DTypeRowBytes(DType dtype, int64_t cols);

inline constexpr int kMaxTensorRank = 4;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int rank = 0;
  std::array<int64_t, kMaxTensorRank> shape{};
  std::array<int64_t, kMaxTensorRank> strides{};  // in elements
  // Optional: the same values of a weight in a layout private to the
  // device's Linear kernel (PackLinearWeight in device/ops.h), owned by
  // whoever owns `data`. Kernels that do not know it read `data`.
  const void* packed = nullptr;

  // Row-major contiguous view with the given shape.
  static TensorView Contiguous(void* data, DType dtype,
                               std::initializer_list<int64_t> shape);

  int64_t dim(int i) const { return shape[i < 0 ? rank + i : i]; }
  int64_t numel() const;
  // numel / block elements * block bytes (numel * DTypeSize when plain).
  size_t nbytes() const;
  bool is_contiguous() const;

  template <typename T>
  T* as() const { return static_cast<T*>(data); }

  // "bfloat16[2048, 5632]".
  std::string DebugString() const;
};

}  // namespace inferd

#endif  // INFERD_DEVICE_TENSOR_H_
