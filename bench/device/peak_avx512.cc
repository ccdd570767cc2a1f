// Register-only AVX-512 loops measuring FMA, vdpbf16ps and vpdpbusd peak throughput,
// and an Eigen GEMM (built for AVX-512) for comparison.
#include <immintrin.h>

#include <cstdint>

#include <Eigen/Core>

namespace inferd {
namespace bench {

// Returns FLOPs executed (2 per FMA lane).
double FmaLoop(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-4f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return static_cast<double>(iters) * 12 * 16 * 2;
}

double Bf16DotLoop(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_setzero_ps();
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x3a803a80);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return static_cast<double>(iters) * 12 * 32 * 2;  // 2 products/lane
}

// Operations executed (2 per multiply-add): vpdpbusd, 64 u8 x s8 products
// per instruction.
__attribute__((target("avx512vnni"))) double VnniDotLoop(int64_t iters) {
  __m512i acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(2);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512i s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_epi32(s, acc[i]);
  volatile int sink = _mm512_reduce_add_epi32(s);
  (void)sink;
  return static_cast<double>(iters) * 12 * 64 * 2;
}

// y[m, n] = x[m, k] * w[n, k]^T with Eigen (single-threaded over a slice).
void EigenLinear(const float* x, const float* w, float* y, int64_t m,
                 int64_t n, int64_t k, int64_t n_begin, int64_t n_end) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const Mat> xm(x, m, k);
  Eigen::Map<const Mat> wm(w + n_begin * k, n_end - n_begin, k);
  Eigen::Map<Mat, 0, Eigen::OuterStride<>> ym(y + n_begin, m, n_end - n_begin,
                                              Eigen::OuterStride<>(n));
  ym.noalias() = xm * wm.transpose();
}

}  // namespace bench
}  // namespace inferd
