// Blocked GEMM for Linear/MatMul at the avx2 level: the shared driver
// (gemm_driver_impl.h) with an AVX2/FMA register-blocked micro-kernel
// (MR x 16 outputs in 2 x MR ymm accumulators), and the portable GEMV
// (gemm_generic_impl.h).
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "device/cpu/gemm.h"

namespace inferd {
namespace cpu_avx2 {
namespace {

constexpr int kNr = 16;
constexpr int kMr = 6;

// C[0..MR, 0..nvalid) (+)= A[0..MR, 0..kc) x Bpanel[0..kc, 0..16), with
// `init` writing bias (or 0) + product instead of accumulating into C.
// Bpanel is packed k-major, 16 floats per k. MR <= 6 keeps the 12
// accumulators, two B vectors and one broadcast in the 16 ymm registers.
template <int MR>
void MicroF32(int64_t kc, const float* a, int64_t lda, const float* bp,
              float* c, int64_t ldc, int nvalid, bool init,
              const float* bias) {
  __m256 lo[MR];
  __m256 hi[MR];
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    lo[i] = _mm256_setzero_ps();
    hi[i] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_loadu_ps(bp + k * kNr);
    const __m256 b1 = _mm256_loadu_ps(bp + k * kNr + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * lda + k);
      lo[i] = _mm256_fmadd_ps(av, b0, lo[i]);
      hi[i] = _mm256_fmadd_ps(av, b1, hi[i]);
    }
  }
  if (nvalid == kNr) {
    const __m256 bias0 = init && bias != nullptr ? _mm256_loadu_ps(bias)
                                                 : _mm256_setzero_ps();
    const __m256 bias1 = init && bias != nullptr ? _mm256_loadu_ps(bias + 8)
                                                 : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      float* cr = c + i * ldc;
      const __m256 base0 = init ? bias0 : _mm256_loadu_ps(cr);
      const __m256 base1 = init ? bias1 : _mm256_loadu_ps(cr + 8);
      _mm256_storeu_ps(cr, _mm256_add_ps(base0, lo[i]));
      _mm256_storeu_ps(cr + 8, _mm256_add_ps(base1, hi[i]));
    }
    return;
  }
  // A partial panel (the last columns): through a buffer.
  alignas(32) float row[kNr];
  for (int i = 0; i < MR; ++i) {
    _mm256_store_ps(row, lo[i]);
    _mm256_store_ps(row + 8, hi[i]);
    float* cr = c + i * ldc;
    for (int j = 0; j < nvalid; ++j) {
      const float base = init ? (bias != nullptr ? bias[j] : 0.0f) : cr[j];
      cr[j] = base + row[j];
    }
  }
}

void GemvRows(const GemmArgs& g, int64_t n_begin, int64_t n_end);

#include "device/cpu/gemm_driver_impl.h"
#define INFERD_GEMM_OWN_MICRO_KERNEL
#include "device/cpu/gemm_generic_impl.h"
#undef INFERD_GEMM_OWN_MICRO_KERNEL

}  // namespace

void Gemm(ThreadPool* pool, const GemmArgs& args) { RunGemmF32(pool, args); }

}  // namespace cpu_avx2
}  // namespace inferd
