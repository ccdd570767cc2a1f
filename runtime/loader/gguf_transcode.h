// The ggml types inferd reads from GGUF files but computes with in another
// block format: Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS. At load each tensor of
// these types is rewritten, block by block, into a device dtype whose
// kernels exist (the int8 panels of the activation-precision design and the
// exact path's dequantized rows, device/quant.h):
//
//   Q3_K   -> Q6_K  exact: a 3-bit value q in [-4, 3] under a 6-bit signed
//                    scale per 16 is Q6_K's (q + 32) - 32 under the same
//                    scale and d (1.9x the bytes).
//   IQ4_NL -> Q8_0  exact: the 4-bit index's codebook value is Q8_0's int8
//                    under the same d (1.9x the bytes).
//   IQ4_XS -> Q8_0  per 32: d' = f16(d * (ls - 32)), q = codebook value;
//                    d' rounded to f16 (relative error <= 2^-11 of the
//                    sub-block's scale; 2.0x the bytes).
//   Q5_K   -> Q5_1  per 32: d' = f16(d * sc), m' = f16(-dmin * m), the
//                    5-bit q as stored; d' and m' rounded to f16 (1.1x).
//   Q2_K   -> Q8_0  requantized per 32 from the decoded values (error <=
//                    max|x| / 254 per value, ggml's q8_0 rounding; 3.2x).
//
// The decoders here are the reference for these types (equal to gguf-py's
// on random blocks: tests/gguf/gguf_reader_test.py). Pure functions;
// thread-safe.
#ifndef INFERD_RUNTIME_LOADER_GGUF_TRANSCODE_H_
#define INFERD_RUNTIME_LOADER_GGUF_TRANSCODE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/optional.h"
#include "device/tensor.h"
#include "runtime/loader/gguf.h"

namespace inferd {

// The dtype ggml type `id` is rewritten to at load; nullopt for types that
// are not rewritten (those computed as stored, and unsupported ones).
absl::optional<DType> TranscodeTarget(uint32_t id);

// Decodes `n` values (whole blocks) of a transcoded type (TranscodeTarget
// has a value) into float32. INVALID_ARGUMENT otherwise.
absl::Status DecodeTranscodedRow(const GgmlTypeInfo& type, const uint8_t* src,
                                 int64_t n, float* dst);

// Rewrites `n` values (whole blocks of `type`, which must have a
// TranscodeTarget) into DTypeRowBytes(target, n) bytes at `dst`.
absl::Status TranscodeRow(const GgmlTypeInfo& type, const uint8_t* src,
                          int64_t n, uint8_t* dst);

}  // namespace inferd

#endif  // INFERD_RUNTIME_LOADER_GGUF_TRANSCODE_H_
