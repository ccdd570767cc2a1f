// AVX-512 VNNI kernels of the int8 GEMM (see int8_gemm.h): a 6-row x
// 64-column register tile of int32 accumulators (24 zmm), vpdpbusd of a
// broadcast group of 4 activation bytes (uint8) against a 64 x 4 weight
// group (int8). Compiled with AVX-512 + VNNI flags; called only when
// HasVnni() and the active ISA is at least AVX-512.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "device/cpu/int8_gemm.h"

namespace inferd {
namespace cpu {
namespace cpu_avx512 {
namespace {

constexpr int kMr = 6;

inline __m512i Broadcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

template <int MR>
void Tile(const Int8GemmArgs& g, int64_t panel, int64_t m0) {
  const int8_t* w = g.wpack + panel * g.kp * kInt8PanelCols;
  const uint8_t* x = g.xq + m0 * g.ldq;
  __m512i acc[MR][4];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_si512();
  }
  const int64_t groups = g.kp / 4;
  for (int64_t q = 0; q < groups; ++q) {
    const int8_t* wg = w + q * 256;
    const __m512i b0 = _mm512_loadu_si512(wg);
    const __m512i b1 = _mm512_loadu_si512(wg + 64);
    const __m512i b2 = _mm512_loadu_si512(wg + 128);
    const __m512i b3 = _mm512_loadu_si512(wg + 192);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512i a = Broadcast4(x + r * g.ldq + 4 * q);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], a, b0);
      acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], a, b1);
      acc[r][2] = _mm512_dpbusd_epi32(acc[r][2], a, b2);
      acc[r][3] = _mm512_dpbusd_epi32(acc[r][3], a, b3);
    }
  }
  const int64_t n0 = panel * kInt8PanelCols;
  const int64_t valid = std::min<int64_t>(kInt8PanelCols, g.n - n0);
  __m512i wsum[4];
  __m512 wscale[4], bias[4];
  __mmask16 mask[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    wsum[j] = _mm512_loadu_si512(g.wsum + n0 + 16 * j);
    wscale[j] = _mm512_loadu_ps(g.wscale + n0 + 16 * j);
    bias[j] = g.bias != nullptr ? _mm512_loadu_ps(g.bias + n0 + 16 * j)
                                : _mm512_setzero_ps();
    const int64_t left = valid - 16 * j;
    mask[j] = left >= 16 ? static_cast<__mmask16>(0xFFFF)
              : left <= 0 ? static_cast<__mmask16>(0)
                          : static_cast<__mmask16>((1u << left) - 1);
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    const __m512i z = _mm512_set1_epi32(g.xzero[m0 + r]);
    const __m512 s = _mm512_set1_ps(g.xscale[m0 + r]);
    float* y = g.y + (m0 + r) * g.ldy + n0;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i v =
          _mm512_sub_epi32(acc[r][j], _mm512_mullo_epi32(z, wsum[j]));
      const __m512 f = _mm512_add_ps(
          _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(s, wscale[j])),
          bias[j]);
      _mm512_mask_storeu_ps(y + 16 * j, mask[j], f);
    }
  }
}

}  // namespace

bool HasVnni() {
  static const bool has = __builtin_cpu_supports("avx512vnni");
  return has;
}

void Int8GemmTile(const Int8GemmArgs& g, int64_t p_begin, int64_t p_end,
                  int64_t m_begin, int64_t m_end) {
  for (int64_t p = p_begin; p < p_end; ++p) {
    int64_t m = m_begin;
    for (; m + kMr <= m_end; m += kMr) Tile<kMr>(g, p, m);
    switch (m_end - m) {
      case 5: Tile<5>(g, p, m); break;
      case 4: Tile<4>(g, p, m); break;
      case 3: Tile<3>(g, p, m); break;
      case 2: Tile<2>(g, p, m); break;
      case 1: Tile<1>(g, p, m); break;
      default: break;
    }
  }
}

void QuantizeRowsU8(const float* x, int64_t ldx, int64_t k, int64_t begin,
                    int64_t end, uint8_t* xq, int64_t ldq, float* scale,
                    int32_t* zero) {
  for (int64_t i = begin; i < end; ++i) {
    const float* row = x + i * ldx;
    uint8_t* out = xq + i * ldq;
    __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
    int64_t c = 0;
    for (; c + 16 <= k; c += 16) {
      const __m512 v = _mm512_loadu_ps(row + c);
      lo = _mm512_min_ps(lo, v);
      hi = _mm512_max_ps(hi, v);
    }
    if (c < k) {
      const __mmask16 m = static_cast<__mmask16>((1u << (k - c)) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(m, row + c);  // zeros: harmless
      lo = _mm512_min_ps(lo, v);
      hi = _mm512_max_ps(hi, v);
    }
    const float l = _mm512_reduce_min_ps(lo);
    const float h = _mm512_reduce_max_ps(hi);
    const float s = h > l ? (h - l) / 255.0f : 1.0f;
    const float inv = 1.0f / s;
    const float zf = std::min(255.0f, std::max(0.0f, std::nearbyint(-l * inv)));
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512i vz = _mm512_set1_epi32(static_cast<int32_t>(zf));
    const __m512i v0 = _mm512_setzero_si512();
    const __m512i v255 = _mm512_set1_epi32(255);
    for (c = 0; c < k; c += 16) {
      const int64_t left = k - c;
      const __mmask16 m = left >= 16 ? static_cast<__mmask16>(0xFFFF)
                                     : static_cast<__mmask16>((1u << left) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(m, row + c);
      __m512i q = _mm512_add_epi32(
          _mm512_cvtps_epi32(_mm512_mul_ps(v, vinv)), vz);
      q = _mm512_min_epi32(_mm512_max_epi32(q, v0), v255);
      _mm_mask_storeu_epi8(out + c, m, _mm512_cvtepi32_epi8(q));
    }
    for (int64_t p = k; p < ldq; ++p) out[p] = 0;
    scale[i] = s;
    zero[i] = static_cast<int32_t>(zf);
  }
}

}  // namespace cpu_avx512
}  // namespace cpu
}  // namespace inferd
