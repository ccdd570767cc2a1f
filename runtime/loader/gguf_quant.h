// Reference dequantization of ggml tensor blocks (the data of GGUF
// tensors): F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K and Q6_K by
// the device layer's reference decoders (device/quant.h), which the
// optimized kernels are checked against; Q2_K, Q3_K, Q5_K, IQ4_NL and
// IQ4_XS by gguf_transcode.h's (the types rewritten at load). One row at a
// time into float32. Pure functions; thread-safe.
#ifndef INFERD_RUNTIME_LOADER_GGUF_QUANT_H_
#define INFERD_RUNTIME_LOADER_GGUF_QUANT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/loader/gguf.h"

namespace inferd {

// Whether DequantizeRow handles `type`.
bool CanDequantize(const GgmlTypeInfo& type);

// Decodes `n` values (a multiple of type.block_elements) stored at `src`
// (n / block_elements blocks of block_bytes) into `dst`. INVALID_ARGUMENT
// for another n or a type it does not handle (naming it).
absl::Status DequantizeRow(const GgmlTypeInfo& type, const uint8_t* src,
                           int64_t n, float* dst);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_GGUF_QUANT_H_
