#include "runtime/loader/gguf_quant.h"

#include "absl/strings/str_cat.h"
#include "device/quant.h"
#include "runtime/loader/gguf_transcode.h"

namespace inferd {
namespace {

// The device dtype holding ggml type `id`'s blocks, or false.
bool DeviceDType(uint32_t id, DType* dtype) {
  switch (id) {
    case 0: *dtype = DType::kF32; return true;
    case 1: *dtype = DType::kF16; return true;
    case 30: *dtype = DType::kBF16; return true;
    case 8: *dtype = DType::kQ8_0; return true;
    case 2: *dtype = DType::kQ4_0; return true;
    case 3: *dtype = DType::kQ4_1; return true;
    case 6: *dtype = DType::kQ5_0; return true;
    case 7: *dtype = DType::kQ5_1; return true;
    case 12: *dtype = DType::kQ4_K; return true;
    case 14: *dtype = DType::kQ6_K; return true;
    default: return false;
  }
}

}  // namespace

bool CanDequantize(const GgmlTypeInfo& type) {
  DType dtype;
  return DeviceDType(type.id, &dtype) || TranscodeTarget(type.id).has_value();
}

absl::Status DequantizeRow(const GgmlTypeInfo& type, const uint8_t* src,
                           int64_t n, float* dst) {
  DType dtype;
  if (!DeviceDType(type.id, &dtype) && TranscodeTarget(type.id).has_value()) {
    return DecodeTranscodedRow(type, src, n, dst);
  }
  if (!DeviceDType(type.id, &dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ggml type ", type.name, " cannot be dequantized by inferd yet"));
  }
  if (n < 0 || n % type.block_elements != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        n, " values are not whole ", type.name, " blocks of ",
        type.block_elements));
  }
  return DequantizeRow(dtype, src, n, dst);
}

}  // namespace inferd
