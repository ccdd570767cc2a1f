#include "device/tensor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace inferd {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kI64:
      return 8;
    case DType::kI8:
    case DType::kU8:
      return 1;
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ4_K:
    case DType::kQ6_K:
    case DType::kQ5_0:
    case DType::kQ5_1:
      return 0;
  }
  return 0;
}

bool IsBlockQuantized(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ4_K:
    case DType::kQ6_K:
    case DType::kQ5_0:
    case DType::kQ5_1:
      return true;
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kI32:
    case DType::kI64:
    case DType::kI8:
    case DType::kU8:
      return false;
  }
  return false;
}

int64_t DTypeBlockElements(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
      return 32;
    case DType::kQ4_K:
    case DType::kQ6_K:
      return 256;
    default:
      return 1;
  }
}

size_t DTypeBlockBytes(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0: return 34;   // f16 d, 32 x int8
    case DType::kQ4_0: return 18;   // f16 d, 16 bytes of nibbles
    case DType::kQ4_1: return 20;   // f16 d, f16 m, 16 bytes of nibbles
    case DType::kQ4_K: return 144;  // f16 d, f16 dmin, 12 scales, 128 nibbles
    case DType::kQ6_K: return 210;  // 128 ql, 64 qh, 16 scales, f16 d
    case DType::kQ5_0: return 22;   // f16 d, 32 high bits, 16 bytes of nibbles
    case DType::kQ5_1: return 24;   // f16 d, f16 m, 32 high bits, 16 bytes
    default: return DTypeSize(dtype);
  }
}

size_t DTypeRowBytes(DType dtype, int64_t cols) {
  return static_cast<size_t>(cols / DTypeBlockElements(dtype)) *
         DTypeBlockBytes(dtype);
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kI8: return "int8";
    case DType::kU8: return "uint8";
    case DType::kQ8_0: return "q8_0";
    case DType::kQ4_0: return "q4_0";
    case DType::kQ4_1: return "q4_1";
    case DType::kQ4_K: return "q4_k";
    case DType::kQ6_K: return "q6_k";
    case DType::kQ5_0: return "q5_0";
    case DType::kQ5_1: return "q5_1";
  }
  return "unknown";
}

TensorView TensorView::Contiguous(void* data, DType dtype,
                                  std::initializer_list<int64_t> shape) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.rank = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t d : shape) v.shape[i++] = d;
  int64_t stride = 1;
  for (int j = v.rank - 1; j >= 0; --j) {
    v.strides[j] = stride;
    stride *= v.shape[j];
  }
  return v;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

size_t TensorView::nbytes() const {
  return DTypeRowBytes(dtype, numel());
}

bool TensorView::is_contiguous() const {
  int64_t stride = 1;
  for (int j = rank - 1; j >= 0; --j) {
    if (shape[j] != 1 && strides[j] != stride) return false;
    stride *= shape[j];
  }
  return true;
}

std::string TensorView::DebugString() const {
  return absl::StrCat(DTypeName(dtype), "[",
                      absl::StrJoin(shape.begin(), shape.begin() + rank, ", "),
                      "]");
}

}  // namespace inferd
