// ggml block-quantized weight formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
// Q6_K): row
// dequantization and round-to-nearest quantization, plain scalar code written
// from the block layouts. These define what a quantized weight means; the
// optimized kernels are tested against them. Pure functions; thread-safe.
//
// Block layouts (little-endian, f16 = IEEE half):
//   Q8_0  32 values,  34 bytes: f16 d, int8 q[32]            x = d * q
//   Q4_0  32 values,  18 bytes: f16 d, u8 qs[16]              x = d * (q - 8)
//   Q4_1  32 values,  20 bytes: f16 d, f16 m, u8 qs[16]       x = d * q + m
//         (value j < 16 is the low nibble of qs[j], value j + 16 its high one)
//   Q5_0  32 values,  22 bytes: f16 d, u32 qh, u8 qs[16]      x = d * (q - 16)
//   Q5_1  32 values,  24 bytes: f16 d, f16 m, u32 qh, u8 qs[16]  x = d * q + m
//         (q = the nibble as in Q4, plus bit j of qh (little-endian) as its
//         bit 4 for value j)
//   Q4_K 256 values, 144 bytes: f16 d, f16 dmin, u8 scales[12] (6-bit scale
//         and min of 8 sub-blocks of 32), u8 qs[128]: 32 bytes per pair of
//         sub-blocks (low nibbles: the first, high: the second);
//         x = d * sc * q - dmin * m
//   Q6_K 256 values, 210 bytes: u8 ql[128] (low 4 bits), u8 qh[64] (high 2
//         bits), int8 scales[16] (one per 16 values), f16 d;
//         x = d * scale * (q - 32)
// The sizes themselves (DTypeBlockElements, DTypeBlockBytes, DTypeRowBytes,
// IsBlockQuantized) are declared in device/tensor.h.
#ifndef INFERD_DEVICE_QUANT_H_
#define INFERD_DEVICE_QUANT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "device/tensor.h"

namespace inferd {

// Decodes `n` values (a multiple of DTypeBlockElements(dtype)) stored at
// `src` into `dst`. Handles F32, F16, BF16 and every block-quantized dtype;
// INVALID_ARGUMENT for another dtype or n.
absl::Status DequantizeRow(DType dtype, const void* src, int64_t n,
                           float* dst);

// Encodes `n` values (a multiple of the block size) into blocks at `dst`
// (DTypeRowBytes(dtype, n) bytes), rounding to nearest as ggml's reference
// quantizers do for Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1. Q4_K and Q6_K use a simple
// min/max (Q4_K) or max-abs (Q6_K) scale per sub-block, without ggml's
// search for the best scales: valid blocks, somewhat larger error. Also
// F32, F16 and BF16. INVALID_ARGUMENT for another dtype or n.
absl::Status QuantizeRow(DType dtype, const float* src, int64_t n, void* dst);

}  // namespace inferd

#endif  // INFERD_DEVICE_QUANT_H_
