// 16 x 16 F32 transpose in AVX-512 registers and the transposing reduction
// of 16 vectors, for translation units built with AVX-512 flags (GEMM
// weight packing, attention key tiles and softmax rows, int8 activation
// quantization).
#ifndef INFERD_DEVICE_CPU_TRANSPOSE_AVX512_IMPL_H_
#define INFERD_DEVICE_CPU_TRANSPOSE_AVX512_IMPL_H_

#include <immintrin.h>

namespace inferd {
namespace cpu_avx512 {

// Transposes r[16] (16 rows of 16 floats) in place into columns: r[c][j]
// becomes the old r[j][c].
inline void Transpose16x16(__m512 r[16]) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + c], 128-bit lane l: rows 4i .. 4i+3 of column 4l + c.
  __m512 u[16];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]);
    const __m512d b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]);
    const __m512d d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  // Gather lane l of u[c], u[4+c], u[8+c], u[12+c]: column 4l + c.
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512 even_lo = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
    const __m512 odd_lo = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
    const __m512 even_hi = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 odd_hi = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
    r[c] = _mm512_shuffle_f32x4(even_lo, even_hi, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(even_lo, even_hi, 0xdd);
    r[4 + c] = _mm512_shuffle_f32x4(odd_lo, odd_hi, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(odd_lo, odd_hi, 0xdd);
  }
}

// r[t] = op over the 16 lanes of v[t], for 16 vectors at once (a
// transposing tree: 45 shuffles and ops instead of 16 horizontal
// reductions, whose scalar results also serialized the quantization).
template <class Op>
inline __m512 ReduceLanes16(const __m512 v[16], Op op) {
  __m512 w[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    // 128-bit lane L: [a0 op a2, b0 op b2, a1 op a3, b1 op b3] of v[2i] = a,
    // v[2i + 1] = b, elements of that lane.
    w[i] = op(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
              _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
  __m512 u[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    // Lane L, element j: v[4i + j] reduced over lane L.
    const __m512d a = _mm512_castps_pd(w[2 * i]), b = _mm512_castps_pd(w[2 * i + 1]);
    u[i] = op(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
              _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 a = op(_mm512_shuffle_f32x4(u[0], u[1], 0x88),
                      _mm512_shuffle_f32x4(u[0], u[1], 0xdd));
  const __m512 b = op(_mm512_shuffle_f32x4(u[2], u[3], 0x88),
                      _mm512_shuffle_f32x4(u[2], u[3], 0xdd));
  // Lane L, element j: v[4L + j] reduced over all lanes.
  return op(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xdd));
}

}  // namespace cpu_avx512
}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_TRANSPOSE_AVX512_IMPL_H_
