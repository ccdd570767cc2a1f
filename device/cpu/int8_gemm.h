// The CPU int8 GEMM behind LinearInt8 (device/int8.h defines the numbers):
// activations quantized per row to uint8 with a zero point, weights packed
// per call into panels of kInt8PanelCols output columns laid out for
// vpdpbusd (uint8 x int8 -> int32 in groups of 4 along K), exact int32
// accumulation, then dequantized with the row and column scales, and the
// zero point removed with the per-column weight sums. The AVX-512 VNNI
// kernels live in int8_gemm_avx512.cc; int8_gemm_cpu.cc has the driver and
// the portable kernels. Thread-safe; the buffers belong to the caller.
#ifndef INFERD_DEVICE_CPU_INT8_GEMM_H_
#define INFERD_DEVICE_CPU_INT8_GEMM_H_

#include <cstdint>

namespace inferd {
namespace cpu {

inline constexpr int64_t kInt8PanelCols = 64;

struct Int8GemmArgs {
  const uint8_t* xq = nullptr;     // [m, kp] quantized activations
  int64_t ldq = 0;                 // kp: K rounded up to a multiple of 4
  const float* xscale = nullptr;   // [m]
  const int32_t* xzero = nullptr;  // [m]
  // Panel p (columns 64p .. 64p + 63): kp / 4 groups of 64 x 4 bytes
  // (column c's weights k = 4g .. 4g + 3 at byte 256 g + 4 c); columns and
  // k past the matrix are zero.
  const int8_t* wpack = nullptr;
  const int32_t* wsum = nullptr;   // [n_pad]: sum over k of each column
  const float* wscale = nullptr;   // [n_pad] (0 past n)
  const float* bias = nullptr;     // [n_pad] (0 past n) or nullptr
  float* y = nullptr;
  int64_t ldy = 0;
  int64_t m = 0, n = 0, kp = 0;
};

namespace cpu_avx512 {
// Whether the CPU has AVX512_VNNI (checked once).
bool HasVnni();
// Rows [m_begin, m_end) of y for panels [p_begin, p_end).
void Int8GemmTile(const Int8GemmArgs& g, int64_t p_begin, int64_t p_end,
                  int64_t m_begin, int64_t m_end);
// Rows [begin, end) of x quantized as QuantizeActivationRowU8 does.
void QuantizeRowsU8(const float* x, int64_t ldx, int64_t k, int64_t begin,
                    int64_t end, uint8_t* xq, int64_t ldq, float* scale,
                    int32_t* zero);
}  // namespace cpu_avx512

}  // namespace cpu
}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_INT8_GEMM_H_
