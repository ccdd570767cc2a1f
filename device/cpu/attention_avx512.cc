// AVX-512 tiled attention with online softmax (FlashAttention-style): one
// call handles a tile of queries of one sequence and all query heads sharing
// one kv head. Per key tile of kKeyTile keys, S = Q K^T and acc += P V run
// as register-blocked GEMM micro-kernels (K tile packed transposed, query
// rows broadcast), softmax and masks vectorized over the tile. Head dims
// that are not a multiple of 16 run zero padded. Called only when the CPU
// supports AVX-512 and head_dim <= 256 (attention_cpu.cc checks).
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "device/cpu/attention.h"
#include "device/cpu/transpose_avx512_impl.h"
#include "device/ops.h"

namespace inferd {
namespace cpu_avx512 {
namespace {

#include "device/cpu/vec_avx512_impl.h"
#include "device/cpu/vec_math_impl.h"

constexpr int kKeyTile = 64;  // keys per tile (4 vectors)
constexpr int kKeyVecs = kKeyTile / 16;
constexpr int kQkRows = 6;  // QK^T register block: 6 x 64

// s[r][0..64) = sum_{e < d} q[r][e] * kt[e][0..64) for R rows of q (row
// stride ldq).
template <int R>
inline void QkBlock(const float* q, int ldq, int d, const float* kt, float* s) {
  __m512 acc[R][kKeyVecs];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kKeyVecs; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int e = 0; e < d; ++e) {
    __m512 b[kKeyVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kKeyVecs; ++v)
      b[v] = _mm512_load_ps(kt + e * kKeyTile + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(q[r * ldq + e]);
#pragma GCC unroll 4
      for (int v = 0; v < kKeyVecs; ++v)
        acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kKeyVecs; ++v)
      _mm512_store_ps(s + r * kKeyTile + 16 * v, acc[r][v]);
}

template <int R>
inline void QkRows(int rows, const float* q, int ldq, int d, const float* kt,
                   float* s) {
  int r = 0;
  for (; r + R <= rows; r += R) {
    QkBlock<R>(q + r * ldq, ldq, d, kt, s + r * kKeyTile);
  }
  if constexpr (R > 1) {
    if (r < rows) {
      QkRows<R - 1>(rows - r, q + r * ldq, ldq, d, kt, s + r * kKeyTile);
    }
  }
}

// acc[r][0..16*DV) += sum_j p[r][j] * v_j[0..16*DV) for R rows, nk keys.
template <int R, int DV>
inline void PvBlock(const float* p, const float* const* vrows, int nk,
                    float* acc, int d) {
  __m512 a[R][DV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < DV; ++v)
      a[r][v] = _mm512_loadu_ps(acc + r * d + 16 * v);
  for (int j = 0; j < nk; ++j) {
    __m512 b[DV];
#pragma GCC unroll 8
    for (int v = 0; v < DV; ++v) b[v] = _mm512_loadu_ps(vrows[j] + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 pv = _mm512_set1_ps(p[r * kKeyTile + j]);
#pragma GCC unroll 8
      for (int v = 0; v < DV; ++v) a[r][v] = _mm512_fmadd_ps(pv, b[v], a[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < DV; ++v)
      _mm512_storeu_ps(acc + r * d + 16 * v, a[r][v]);
}

template <int R, int DV>
inline void PvRows(int rows, const float* p, const float* const* vrows, int nk,
                   float* acc, int d) {
  int r = 0;
  for (; r + R <= rows; r += R) {
    PvBlock<R, DV>(p + r * kKeyTile, vrows, nk, acc + r * d, d);
  }
  if constexpr (R > 1) {
    if (r < rows) {
      PvRows<R - 1, DV>(rows - r, p + r * kKeyTile, vrows, nk, acc + r * d, d);
    }
  }
}

// Head dims up to 256 in column blocks of at most 8 vectors.
template <int DV>
inline void PvCols(int rows, const float* p, const float* const* vrows, int nk,
                   float* acc, int d, int col) {
  constexpr int R = 16 / DV > 0 ? 16 / DV : 1;
  const float* shifted[kKeyTile];
  for (int j = 0; j < nk; ++j) shifted[j] = vrows[j] + col;
  PvRows<R, DV>(rows, p, shifted, nk, acc + col, d);
}

inline void Pv(int rows, const float* p, const float* const* vrows, int nk,
               float* acc, int d) {
  for (int col = 0; col < d; col += 128) {
    switch ((d - col >= 128 ? 128 : d - col) / 16) {
      case 1:
        PvCols<1>(rows, p, vrows, nk, acc, d, col);
        break;
      case 2:
        PvCols<2>(rows, p, vrows, nk, acc, d, col);
        break;
      case 3:
        PvCols<3>(rows, p, vrows, nk, acc, d, col);
        break;
      case 4:
        PvCols<4>(rows, p, vrows, nk, acc, d, col);
        break;
      case 5:
        PvCols<5>(rows, p, vrows, nk, acc, d, col);
        break;
      case 6:
        PvCols<6>(rows, p, vrows, nk, acc, d, col);
        break;
      case 7:
        PvCols<7>(rows, p, vrows, nk, acc, d, col);
        break;
      default:
        PvCols<8>(rows, p, vrows, nk, acc, d, col);
        break;
    }
  }
}

inline __mmask16 TailMask(int valid) {
  return valid >= 16 ? static_cast<__mmask16>(0xffff)
                     : static_cast<__mmask16>((1u << valid) - 1);
}

// d elements -> dst, zero padded to a multiple of 16.
inline void RowToF32(const void* src, bool bf16, float* dst, int d) {
  for (int e = 0; e < d; e += 16) {
    const __mmask16 mk = TailMask(d - e);
    __m512 v;
    if (bf16) {
      const __m256i raw =
          _mm256_maskz_loadu_epi16(mk, static_cast<const uint16_t*>(src) + e);
      v = _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
    } else {
      v = _mm512_maskz_loadu_ps(mk, static_cast<const float*>(src) + e);
    }
    _mm512_storeu_ps(dst + e, v);
  }
}

// Keys/values of position `pos`: F32 rows are used in place.
inline void KvRow(const AttnJob& job, int64_t pos, const void** k,
                  const void** v) {
  if (job.k != nullptr) {
    *k = job.k + pos * job.ldk;
    *v = job.v + pos * job.ldv;
    return;
  }
  const int64_t slot =
      int64_t{job.block_table[pos / job.block_size]} * job.block_size +
      pos % job.block_size;
  const int64_t off =
      slot * job.slot_stride + int64_t{job.kv_head} * job.head_dim;
  const size_t esize = job.cache_bf16 ? 2 : 4;
  *k = static_cast<const char*>(job.k_cache) + off * esize;
  *v = static_cast<const char*>(job.v_cache) + off * esize;
}

constexpr int kPrefetchRows = 4;

inline void PrefetchRow(const void* p, int bytes) {
  const char* c = static_cast<const char*>(p);
  for (int off = 0; off < bytes; off += 64) {
    _mm_prefetch(c + off, _MM_HINT_T0);
  }
}

inline uint64_t RangeMask(int64_t lo, int64_t hi) {
  const uint64_t below_hi = hi >= 64 ? ~uint64_t{0} : (uint64_t{1} << hi) - 1;
  const uint64_t below_lo = lo >= 64 ? ~uint64_t{0} : (uint64_t{1} << lo) - 1;
  return below_hi & ~below_lo;
}

// Scores s[rows][kKeyTile] of key tile k0 (nk keys) -> probabilities in
// place (0 where masked), with the online-softmax state: row maxima m, sums
// l, and the accumulators acc[rows][dp] rescaled where a maximum grew.
inline void SoftmaxTile(const AttnJob& job, int64_t q_begin, int64_t k0, int nk,
                        int rows, float* s, float* m, float* l, float* acc, int dp) {
  const int group = job.group;
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  // Softmax in groups of 16 rows: their maxima and sums come out of one
  // transposing reduction each (ReduceLanes16) and their corrections out
  // of one exp, instead of per-row horizontal reductions whose scalar
  // results serialized the rows.
  for (int r0 = 0; r0 < rows; r0 += 16) {
    const int nr = rows - r0 < 16 ? rows - r0 : 16;
    const __mmask16 live = static_cast<__mmask16>(nr == 16 ? 0xffff : (1u << nr) - 1);
    __m512 red[16];
    for (int i = 0; i < 16; ++i) {
      red[i] = neg_inf;
      if (i >= nr) continue;
      const int r = r0 + i;
      const int64_t pos = job.first_pos + q_begin + r / group;
      int64_t lo, hi;
      VisibleKeys(job, pos, k0, nk, &lo, &hi);
      // Masked (capped, biased) scores back into the row; -inf where masked.
      const uint64_t mask = hi <= lo ? 0 : RangeMask(lo, hi);
      float* sr = s + r * kKeyTile;
      // The relative bias of this row's head for the tile's keys: read in
      // place where the tile's offsets lie inside the table, else clamped.
      const float* bias = nullptr;
      alignas(64) float clamped[kKeyTile];
      if (job.rel_bias != nullptr) {
        const int g = r % group;
        const int64_t rad = job.rel_radius;
        const int64_t rel0 = k0 - pos;
        if (rel0 >= -rad && rel0 + kKeyTile - 1 <= rad) {
          bias = job.rel_bias + g * (2 * rad + 1) + rel0 + rad;
        } else {
          for (int j = 0; j < kKeyTile; ++j) clamped[j] = RelBias(job, g, rel0 + j);
          bias = clamped;
        }
      }
#pragma GCC unroll 4
      for (int v = 0; v < kKeyVecs; ++v) {
        __m512 t = _mm512_load_ps(sr + 16 * v);
        if (job.softcap > 0.0f) {
          const __m512 cap = _mm512_set1_ps(job.softcap);
          t = _mm512_mul_ps(cap, VTanh(_mm512_div_ps(t, cap)));
        }
        if (bias != nullptr) t = _mm512_add_ps(t, _mm512_loadu_ps(bias + 16 * v));
        t = _mm512_mask_blend_ps(static_cast<__mmask16>(mask >> (16 * v)), neg_inf, t);
        _mm512_store_ps(sr + 16 * v, t);
        red[i] = _mm512_max_ps(red[i], t);
      }
    }
    const __m512 tile_max =
        ReduceLanes16(red, [](__m512 x, __m512 y) { return _mm512_max_ps(x, y); });
    const __m512 m_old = _mm512_mask_loadu_ps(neg_inf, live, m + r0);
    const __m512 m_new = _mm512_max_ps(m_old, tile_max);
    // Rows with earlier keys rescale their sums and accumulators by
    // exp(m_old - m_new) (1 when the maximum stayed); rows without
    // (m_old = -inf) have nothing to rescale.
    const __mmask16 had = _mm512_cmp_ps_mask(m_old, neg_inf, _CMP_NEQ_OQ);
    const __m512 corr = _mm512_maskz_mov_ps(had, VExp(_mm512_sub_ps(m_old, m_new)));
    alignas(64) float mn[16], cr[16];
    _mm512_store_ps(mn, m_new);
    _mm512_store_ps(cr, corr);
    _mm512_mask_storeu_ps(m + r0, live, m_new);
    for (int i = 0; i < 16; ++i) {
      red[i] = _mm512_setzero_ps();
      if (i >= nr) continue;
      const int r = r0 + i;
      float* sr = s + r * kKeyTile;
      const __m512 vm = _mm512_set1_ps(mn[i]);
#pragma GCC unroll 4
      for (int v = 0; v < kKeyVecs; ++v) {
        const __m512 x = _mm512_load_ps(sr + 16 * v);
        const __mmask16 mk = _mm512_cmp_ps_mask(x, neg_inf, _CMP_NEQ_OQ);
        const __m512 p = _mm512_maskz_mov_ps(mk, VExp(_mm512_sub_ps(x, vm)));
        _mm512_store_ps(sr + 16 * v, p);
        red[i] = _mm512_add_ps(red[i], p);
      }
      if (cr[i] != 1.0f) {
        const __m512 vc = _mm512_set1_ps(cr[i]);
        float* a = acc + r * dp;
        for (int e = 0; e < dp; e += 16) {
          _mm512_storeu_ps(a + e, _mm512_mul_ps(_mm512_loadu_ps(a + e), vc));
        }
      }
    }
    const __m512 sums =
        ReduceLanes16(red, [](__m512 x, __m512 y) { return _mm512_add_ps(x, y); });
    const __m512 l_old = _mm512_maskz_loadu_ps(live, l + r0);
    _mm512_mask_storeu_ps(l + r0, live, _mm512_fmadd_ps(l_old, corr, sums));
  }
}

// out rows of the queries [q_begin, q_end): acc[r] / l[r] (0 where no key
// was seen).
inline void WriteRows(const AttnJob& job, int64_t q_begin, int64_t q_end, const float* acc,
                      const float* l, int dp) {
  const int d = job.head_dim;
  for (int64_t qi = q_begin; qi < q_end; ++qi) {
    for (int g = 0; g < job.group; ++g) {
      const int r = static_cast<int>((qi - q_begin) * job.group + g);
      const __m512 inv = _mm512_set1_ps(l[r] > 0.0f ? 1.0f / l[r] : 0.0f);
      float* o = job.out + qi * job.ldo + int64_t{g} * d;
      for (int e = 0; e < dp; e += 16) {
        _mm512_mask_storeu_ps(o + e, TailMask(d - e),
                              _mm512_mul_ps(_mm512_loadu_ps(acc + r * dp + e), inv));
      }
    }
  }
}

// ---- BF16 products (AttnJob::bf16) ---------------------------------------
// Pairs are two BF16 values in one 32-bit word, the lower one first:
// queries and key tiles paired along the head dim (qs2[r][e/2],
// kt2[e/2][j]), probabilities and value tiles paired along the keys
// (p2[r][j/2], vt2[j/2][e]), so each vdpbf16ps adds two products per lane.

// s[r][0..64) = sum over pairs ep < dpair of q2[r][ep] . kt2[ep][0..64).
template <int R>
inline void QkBlockBf16(const uint32_t* q2, int ldq2, int dpair, const uint32_t* kt2,
                        float* s) {
  __m512 acc[R][kKeyVecs];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kKeyVecs; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int ep = 0; ep < dpair; ++ep) {
    __m512bh b[kKeyVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kKeyVecs; ++v)
      b[v] = (__m512bh)_mm512_load_si512(kt2 + ep * kKeyTile + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(q2[r * ldq2 + ep]));
#pragma GCC unroll 4
      for (int v = 0; v < kKeyVecs; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], a, b[v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kKeyVecs; ++v) _mm512_store_ps(s + r * kKeyTile + 16 * v, acc[r][v]);
}

template <int R>
inline void QkRowsBf16(int rows, const uint32_t* q2, int ldq2, int dpair,
                       const uint32_t* kt2, float* s) {
  int r = 0;
  for (; r + R <= rows; r += R) QkBlockBf16<R>(q2 + r * ldq2, ldq2, dpair, kt2, s + r * kKeyTile);
  if constexpr (R > 1) {
    if (r < rows) QkRowsBf16<R - 1>(rows - r, q2 + r * ldq2, ldq2, dpair, kt2, s + r * kKeyTile);
  }
}

// acc[r][0..16*DV) += sum over key pairs jp < nkp of p2[r][jp] . vt2[jp][..]
// for R rows (vt2 rows of ldv2 words, already offset to the column block).
template <int R, int DV>
inline void PvBlockBf16(const uint32_t* p2, const uint32_t* vt2, int ldv2, int nkp,
                        float* acc, int d) {
  __m512 a[R][DV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < DV; ++v) a[r][v] = _mm512_loadu_ps(acc + r * d + 16 * v);
  for (int jp = 0; jp < nkp; ++jp) {
    __m512bh b[DV];
#pragma GCC unroll 8
    for (int v = 0; v < DV; ++v) b[v] = (__m512bh)_mm512_load_si512(vt2 + jp * ldv2 + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512bh pv =
          (__m512bh)_mm512_set1_epi32(static_cast<int>(p2[r * (kKeyTile / 2) + jp]));
#pragma GCC unroll 8
      for (int v = 0; v < DV; ++v) a[r][v] = _mm512_dpbf16_ps(a[r][v], pv, b[v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < DV; ++v) _mm512_storeu_ps(acc + r * d + 16 * v, a[r][v]);
}

template <int R, int DV>
inline void PvRowsBf16(int rows, const uint32_t* p2, const uint32_t* vt2, int ldv2,
                       int nkp, float* acc, int d) {
  int r = 0;
  for (; r + R <= rows; r += R) {
    PvBlockBf16<R, DV>(p2 + r * (kKeyTile / 2), vt2, ldv2, nkp, acc + r * d, d);
  }
  if constexpr (R > 1) {
    if (r < rows) {
      PvRowsBf16<R - 1, DV>(rows - r, p2 + r * (kKeyTile / 2), vt2, ldv2, nkp, acc + r * d, d);
    }
  }
}

template <int DV>
inline void PvColsBf16(int rows, const uint32_t* p2, const uint32_t* vt2, int nkp,
                       float* acc, int d, int col) {
  constexpr int R = 16 / DV > 0 ? 16 / DV : 1;
  PvRowsBf16<R, DV>(rows, p2, vt2 + col, d, nkp, acc + col, d);
}

inline void PvBf16(int rows, const uint32_t* p2, const uint32_t* vt2, int nkp, float* acc,
                   int d) {
  for (int col = 0; col < d; col += 128) {
    switch ((d - col >= 128 ? 128 : d - col) / 16) {
      case 1: PvColsBf16<1>(rows, p2, vt2, nkp, acc, d, col); break;
      case 2: PvColsBf16<2>(rows, p2, vt2, nkp, acc, d, col); break;
      case 3: PvColsBf16<3>(rows, p2, vt2, nkp, acc, d, col); break;
      case 4: PvColsBf16<4>(rows, p2, vt2, nkp, acc, d, col); break;
      case 5: PvColsBf16<5>(rows, p2, vt2, nkp, acc, d, col); break;
      case 6: PvColsBf16<6>(rows, p2, vt2, nkp, acc, d, col); break;
      case 7: PvColsBf16<7>(rows, p2, vt2, nkp, acc, d, col); break;
      default: PvColsBf16<8>(rows, p2, vt2, nkp, acc, d, col); break;
    }
  }
}

// TailMask for any count (none at or below 0).
inline __mmask16 MaskUpTo(int valid) {
  return valid <= 0 ? static_cast<__mmask16>(0) : TailMask(valid);
}

// 32 F32 values at src (masked to `valid`, zeros after) -> 16 BF16 pairs.
inline __m512i PairRow(const float* src, int valid) {
  const __m512 lo = _mm512_maskz_loadu_ps(MaskUpTo(valid), src);
  const __m512 hi = _mm512_maskz_loadu_ps(MaskUpTo(valid - 16), src + 16);
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

void AttendTileBf16(const AttnJob& job, int64_t q_begin, int64_t q_end, float* scratch) {
  const int d = job.head_dim;
  const int dp = (d + 15) / 16 * 16;       // accumulator / value row length
  const int dpair = (d + 1) / 2;           // head-dim pairs
  const int ldq2 = (dpair + 15) / 16 * 16;  // query pair row length
  const int group = job.group;
  const int rows = static_cast<int>((q_end - q_begin) * group);
  float* base = reinterpret_cast<float*>(
      (reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  uint32_t* kt2 = reinterpret_cast<uint32_t*>(base);        // [ldq2][kKeyTile]
  uint32_t* vt2 = kt2 + ldq2 * kKeyTile;                    // [kKeyTile/2][dp]
  float* s = reinterpret_cast<float*>(vt2 + kKeyTile / 2 * dp);  // [rows][kKeyTile]
  uint32_t* p2 = reinterpret_cast<uint32_t*>(s + rows * kKeyTile);  // [rows][kKeyTile/2]
  uint32_t* q2 = p2 + rows * (kKeyTile / 2);                // [rows][ldq2]
  float* acc = reinterpret_cast<float*>(q2 + rows * ldq2);  // [rows][dp]
  float* m = acc + rows * dp;
  float* l = m + rows;

  for (int64_t qi = q_begin; qi < q_end; ++qi) {
    if (qi + kPrefetchRows < q_end) {
      PrefetchRow(job.q + (qi + kPrefetchRows) * job.ldq, group * d * 4);
    }
    for (int g = 0; g < group; ++g) {
      const int r = static_cast<int>((qi - q_begin) * group + g);
      const float* src = job.q + qi * job.ldq + int64_t{g} * d;
      alignas(64) float scaled[32];
      for (int e = 0; e < 2 * ldq2; e += 32) {
        for (int h = 0; h < 32; h += 16) {
          const __m512 x = _mm512_maskz_loadu_ps(MaskUpTo(d - e - h), src + e + h);
          _mm512_store_ps(scaled + h, _mm512_mul_ps(x, _mm512_set1_ps(job.scale)));
        }
        _mm512_store_si512(q2 + r * ldq2 + e / 2, PairRow(scaled, 32));
      }
      for (int e = 0; e < dp; e += 16) _mm512_storeu_ps(acc + r * dp + e, _mm512_setzero_ps());
      m[r] = -INFINITY;
      l[r] = 0.0f;
    }
  }

  int64_t key_begin, key_end;
  KeyRange(job, q_begin, q_end, &key_begin, &key_end);
  // Pairs (v_j[e], v_j+1[e]) for 16 e: the BF16 of rows j and j + 1 side by
  // side, then interleaved.
  const __m512i interleave = _mm512_set_epi16(
      31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
      23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t k0 = key_begin; k0 < key_end; k0 += kKeyTile) {
    const int nk = static_cast<int>(key_end - k0 < kKeyTile ? key_end - k0 : kKeyTile);
    const int nkp = (nk + 1) / 2;
    const float* krows[kKeyTile];
    const float* vrows[kKeyTile];
    for (int j = 0; j < nk; ++j) {
      krows[j] = job.k + (k0 + j) * job.ldk;
      vrows[j] = job.v + (k0 + j) * job.ldv;
      if (j + kPrefetchRows < nk) {
        PrefetchRow(job.k + (k0 + j + kPrefetchRows) * job.ldk, d * 4);
        PrefetchRow(job.v + (k0 + j + kPrefetchRows) * job.ldv, d * 4);
      }
    }
    // Key pairs transposed 16 keys x 16 pairs at a time (zero keys past nk).
    for (int j0 = 0; j0 < kKeyTile; j0 += 16) {
      for (int e0 = 0; e0 < 2 * ldq2; e0 += 32) {
        __m512 r[16];
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) {
          r[j] = j0 + j < nk ? _mm512_castsi512_ps(PairRow(krows[j0 + j] + e0, d - e0))
                             : _mm512_setzero_ps();
        }
        Transpose16x16(r);
        for (int t = 0; t < 16; ++t) {
          _mm512_store_ps(reinterpret_cast<float*>(kt2 + (e0 / 2 + t) * kKeyTile + j0), r[t]);
        }
      }
    }
    // Value pairs; a missing partner (odd nk) is zero, as its probability.
    for (int jp = 0; jp < nkp; ++jp) {
      const float* va = vrows[2 * jp];
      const float* vb = 2 * jp + 1 < nk ? vrows[2 * jp + 1] : nullptr;
      for (int e = 0; e < dp; e += 16) {
        const __mmask16 mk = TailMask(d - e);
        const __m512 a = _mm512_maskz_loadu_ps(mk, va + e);
        const __m512 b = vb != nullptr ? _mm512_maskz_loadu_ps(mk, vb + e) : _mm512_setzero_ps();
        const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(b, a);
        _mm512_store_si512(vt2 + jp * dp + e, _mm512_permutexvar_epi16(interleave, both));
      }
    }

    QkRowsBf16<kQkRows>(rows, q2, ldq2, dpair, kt2, s);
    SoftmaxTile(job, q_begin, k0, nk, rows, s, m, l, acc, dp);
    for (int r = 0; r < rows; ++r) {
      const float* pr = s + r * kKeyTile;
      _mm512_store_si512(p2 + r * (kKeyTile / 2),
                         (__m512i)_mm512_cvtne2ps_pbh(_mm512_load_ps(pr + 16), _mm512_load_ps(pr)));
      _mm512_store_si512(p2 + r * (kKeyTile / 2) + 16,
                         (__m512i)_mm512_cvtne2ps_pbh(_mm512_load_ps(pr + 48),
                                                      _mm512_load_ps(pr + 32)));
    }
    PvBf16(rows, p2, vt2, nkp, acc, dp);
  }

  WriteRows(job, q_begin, q_end, acc, l, dp);
}

}  // namespace

bool AttendTileSupported(int head_dim) {
  return head_dim > 0 && head_dim <= 256;
}

int64_t AttendScratchFloatsIsa(int64_t rows, int head_dim) {
  const int64_t d = (head_dim + 15) / 16 * 16;
  // q, acc, s, m, l, kt, vt (+ alignment slack); the BF16 path's pairs
  // (AttendTileBf16) fit in the same plus p2 and the query pairs' padding.
  return rows * d * 2 + rows * kKeyTile + 2 * rows + 2 * kKeyTile * d + 64 +
         rows * (kKeyTile / 2 + 16) + 16 * kKeyTile;
}

void AttendTileIsa(const AttnJob& job, int64_t q_begin, int64_t q_end,
                   float* scratch) {
  if (job.bf16 && job.k != nullptr) {
    AttendTileBf16(job, q_begin, q_end, scratch);
    return;
  }
  const int d = job.head_dim;
  const int dp = (d + 15) / 16 * 16;  // padded row length
  const bool copy_v = job.cache_bf16 || dp != d;
  const int group = job.group;
  const int rows = static_cast<int>((q_end - q_begin) * group);
  float* base = reinterpret_cast<float*>(
      (reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  float* kt = base;                 // [dp][kKeyTile], 64-byte aligned
  float* vt = kt + kKeyTile * dp;   // [kKeyTile][dp] converted values
  float* s = vt + kKeyTile * dp;    // [rows][kKeyTile]
  float* qs = s + rows * kKeyTile;  // [rows][dp] scaled queries
  float* acc = qs + rows * dp;      // [rows][dp]
  float* m = acc + rows * dp;
  float* l = m + rows;

  const __m512 scale = _mm512_set1_ps(job.scale);
  for (int64_t qi = q_begin; qi < q_end; ++qi) {
    // Query rows are far apart (one row of the fused QKV activations each)
    // and usually not cached: fetch a few rows ahead.
    if (qi + kPrefetchRows < q_end) {
      PrefetchRow(job.q + (qi + kPrefetchRows) * job.ldq, group * d * 4);
    }
    for (int g = 0; g < group; ++g) {
      const int r = static_cast<int>((qi - q_begin) * group + g);
      const float* src = job.q + qi * job.ldq + int64_t{g} * d;
      for (int e = 0; e < dp; e += 16) {
        const __m512 x = _mm512_maskz_loadu_ps(TailMask(d - e), src + e);
        _mm512_storeu_ps(qs + r * dp + e, _mm512_mul_ps(x, scale));
        _mm512_storeu_ps(acc + r * dp + e, _mm512_setzero_ps());
      }
      m[r] = -INFINITY;
      l[r] = 0.0f;
    }
  }

  int64_t key_begin, key_end;
  KeyRange(job, q_begin, q_end, &key_begin, &key_end);
  const float* vrows[kKeyTile];
  for (int64_t k0 = key_begin; k0 < key_end; k0 += kKeyTile) {
    const int nk =
        static_cast<int>(key_end - k0 < kKeyTile ? key_end - k0 : kKeyTile);
    // Pack K^T (zero padded to the full tile) and collect V rows. F32 keys
    // (the batch's own, or an F32 cache) are transposed 16 x 16 in
    // registers (element-wise stores cost half of the QK^T product at
    // head_dim 32); converted ones go through the V staging rows.
    if (!copy_v) {
      const float* krows[kKeyTile];
      for (int j = 0; j < nk; ++j) {
        if (j + kPrefetchRows < nk) {
          const void* kr;
          const void* vr;
          KvRow(job, k0 + j + kPrefetchRows, &kr, &vr);
          PrefetchRow(kr, d * 4);
          PrefetchRow(vr, d * 4);
        }
        const void* kr;
        const void* vr;
        KvRow(job, k0 + j, &kr, &vr);
        krows[j] = static_cast<const float*>(kr);
        vrows[j] = static_cast<const float*>(vr);
      }
      for (int j0 = 0; j0 < kKeyTile; j0 += 16) {
        for (int e0 = 0; e0 < d; e0 += 16) {
          const __mmask16 mk = TailMask(d - e0);
          __m512 r[16];
#pragma GCC unroll 16
          for (int j = 0; j < 16; ++j) {
            r[j] = j0 + j < nk ? _mm512_maskz_loadu_ps(mk, krows[j0 + j] + e0)
                               : _mm512_setzero_ps();
          }
          Transpose16x16(r);
          const int ne = d - e0 < 16 ? d - e0 : 16;
          for (int t = 0; t < ne; ++t) {
            _mm512_store_ps(kt + (e0 + t) * kKeyTile + j0, r[t]);
          }
        }
      }
    }
    for (int j = 0; copy_v && j < nk; ++j) {
      const void* kr;
      const void* vr;
      if (j + kPrefetchRows < nk) {  // as for the queries
        KvRow(job, k0 + j + kPrefetchRows, &kr, &vr);
        const int row_bytes = d * (job.k == nullptr && job.cache_bf16 ? 2 : 4);
        PrefetchRow(kr, row_bytes);
        PrefetchRow(vr, row_bytes);
      }
      KvRow(job, k0 + j, &kr, &vr);
      const bool bf16 = job.k == nullptr && job.cache_bf16;
      float* kf = vt + j * dp;  // staging; overwritten by V below
      RowToF32(kr, bf16, kf, d);
      for (int e = 0; e < d; ++e) kt[e * kKeyTile + j] = kf[e];
      RowToF32(vr, bf16, vt + j * dp, d);
      vrows[j] = vt + j * dp;
    }
    for (int j = nk; copy_v && j < kKeyTile; ++j) {
      for (int e = 0; e < d; ++e) kt[e * kKeyTile + j] = 0.0f;
    }

    QkRows<kQkRows>(rows, qs, dp, d, kt, s);

    SoftmaxTile(job, q_begin, k0, nk, rows, s, m, l, acc, dp);
    Pv(rows, s, vrows, nk, acc, dp);
  }

  WriteRows(job, q_begin, q_end, acc, l, dp);
}

}  // namespace cpu_avx512
}  // namespace inferd
