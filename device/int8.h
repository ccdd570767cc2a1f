// Int8 linear layers (the `dtype=int8` compute path of encoders): the
// quantization rules that define what an int8 weight and a quantized
// activation row mean, and the plain reference GEMM the optimized kernels
// (device/cpu/int8_gemm_*.cc) are tested against. Pure functions;
// thread-safe.
//
// Weights: symmetric per output channel. Row n of an F32 weight [N, K] is
// stored as int8 q[n, :] in [-127, 127] with scale[n] = max|w[n, :]| / 127
// (1 for an all-zero row): w[n, k] ~= scale[n] * q[n, k].
//
// Activations: asymmetric per token (row), computed at each Linear call.
// With lo = min(0, min x) and hi = max(0, max x): s = (hi - lo) / 255 (1 when
// hi == lo), z = nearbyint(-lo / s) in [0, 255],
// u[k] = clamp(nearbyint(x[k] / s) + z, 0, 255) as uint8, so
// x[k] ~= s * (u[k] - z) (0 is exact). Rounding is to nearest even, the
// default FP rounding mode, as the vector conversions do.
//
// GEMM: acc[m, n] = sum_k u[m, k] * q[n, k] - z[m] * sum_k q[n, k] (exact in
// int32 for K < 2^16), y[m, n] = float(acc) * (s[m] * scale[n]) + bias[n].
#ifndef INFERD_DEVICE_INT8_H_
#define INFERD_DEVICE_INT8_H_

#include <cstdint>

namespace inferd {

// q [rows, cols] and scale [rows] from the F32 rows of w (row-major).
void QuantizeWeightRowsInt8(const float* w, int64_t rows, int64_t cols,
                            int8_t* q, float* scale);

// One activation row of n values: u[n], scale s and zero point z.
void QuantizeActivationRowU8(const float* x, int64_t n, uint8_t* u,
                             float* scale, int32_t* zero_point);

// The reference: y[M, N] (row stride ldy) from x [M, K] (row stride ldx),
// q [N, K] contiguous, scale [N], bias [N] or nullptr, by the rules above
// with int64 sums.
void ReferenceLinearInt8(const float* x, int64_t ldx, const int8_t* q,
                         const float* scale, const float* bias, int64_t m,
                         int64_t n, int64_t k, float* y, int64_t ldy);

}  // namespace inferd

#endif  // INFERD_DEVICE_INT8_H_
