// AVX-512 GEMM/GEMV kernels for Linear: F32 FMA micro-kernel (12 x 32),
// AVX512_BF16 vdpbf16ps micro-kernel for BF16 weights, and row-streaming
// GEMV for decode. Compiled with AVX-512 flags; only called after the
// runtime CPU check (see linear_cpu.cc).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "device/cpu/gemm.h"
#include "device/cpu/transpose_avx512_impl.h"

namespace inferd {
namespace cpu_avx512 {
namespace {

constexpr int kNr = 32;
constexpr int kMr = 12;

inline __mmask16 TailMask(int64_t valid) {
  return valid >= 16
             ? static_cast<__mmask16>(0xffff)
             : static_cast<__mmask16>((1u << (valid > 0 ? valid : 0)) - 1);
}

// Stores acc (+ bias on the first K block, else + existing c).
inline void StoreTile(__m512 v0, __m512 v1, float* c, int nvalid, bool init,
                      const float* bias) {
  const __mmask16 m0 = TailMask(nvalid), m1 = TailMask(nvalid - 16);
  if (init) {
    if (bias != nullptr) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, bias));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, bias + 16));
    }
  } else {
    v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, c));
    v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, c + 16));
  }
  _mm512_mask_storeu_ps(c, m0, v0);
  _mm512_mask_storeu_ps(c + 16, m1, v1);
}

template <int MR>
void MicroF32(int64_t kc, const float* a, int64_t lda, const float* bp,
              float* c, int64_t ldc, int nvalid, bool init, const float* bias) {
  __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(bp + k * kNr);
    const __m512 b1 = _mm512_load_ps(bp + k * kNr + 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(a[i * lda + k]);
      acc0[i] = _mm512_fmadd_ps(av, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(av, b1, acc1[i]);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    StoreTile(acc0[i], acc1[i], c + i * ldc, nvalid, init, bias);
  }
}

// GEMV: rows [n_begin, n_end) of y for M <= kGemvMaxM, streaming W once.
template <int M, int R, bool kBf16>
void GemvBlock(const GemmArgs& g, int64_t n) {
  __m512 acc[R][M];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m) acc[r][m] = _mm512_setzero_ps();
  for (int64_t k = 0; k < g.k; k += 16) {
    const __mmask16 mask = TailMask(g.k - k);
    __m512 xv[M];
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m)
      xv[m] = _mm512_maskz_loadu_ps(mask, g.x + m * g.ldx + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __m512 wv;
      if constexpr (kBf16) {
        const uint16_t* w =
            static_cast<const uint16_t*>(g.w) + (n + r) * g.ldw + k;
        const __m256i raw = _mm256_maskz_loadu_epi16(mask, w);
        wv = _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
      } else {
        wv = _mm512_maskz_loadu_ps(
            mask, static_cast<const float*>(g.w) + (n + r) * g.ldw + k);
      }
#pragma GCC unroll 8
      for (int m = 0; m < M; ++m)
        acc[r][m] = _mm512_fmadd_ps(wv, xv[m], acc[r][m]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const float b = g.bias != nullptr ? g.bias[n + r] : 0.0f;
#pragma GCC unroll 8
    for (int m = 0; m < M; ++m)
      g.y[m * g.ldy + n + r] = _mm512_reduce_add_ps(acc[r][m]) + b;
  }
}

template <int M, bool kBf16>
void GemvRowsM(const GemmArgs& g, int64_t n_begin, int64_t n_end) {
  constexpr int R = M <= 2 ? 8 : (M <= 4 ? 4 : 2);
  int64_t n = n_begin;
  for (; n + R <= n_end; n += R) GemvBlock<M, R, kBf16>(g, n);
  for (; n < n_end; ++n) GemvBlock<M, 1, kBf16>(g, n);
}

template <bool kBf16>
void GemvRowsT(const GemmArgs& g, int64_t n_begin, int64_t n_end) {
  switch (g.m) {
    case 1:
      GemvRowsM<1, kBf16>(g, n_begin, n_end);
      break;
    case 2:
      GemvRowsM<2, kBf16>(g, n_begin, n_end);
      break;
    case 3:
      GemvRowsM<3, kBf16>(g, n_begin, n_end);
      break;
    case 4:
      GemvRowsM<4, kBf16>(g, n_begin, n_end);
      break;
    case 5:
      GemvRowsM<5, kBf16>(g, n_begin, n_end);
      break;
    case 6:
      GemvRowsM<6, kBf16>(g, n_begin, n_end);
      break;
    case 7:
      GemvRowsM<7, kBf16>(g, n_begin, n_end);
      break;
    default:
      GemvRowsM<8, kBf16>(g, n_begin, n_end);
      break;
  }
}

void GemvRows(const GemmArgs& g, int64_t n_begin, int64_t n_end) {
  if (g.w_bf16) {
    GemvRowsT<true>(g, n_begin, n_end);
  } else {
    GemvRowsT<false>(g, n_begin, n_end);
  }
}

// Weight storage PackPanelNkAvx512 reads.
enum class WKind { kF32, kBf16, kF16 };

// Packs weight rows stored [n][k] (F32, or BF16 / F16 widened to F32) into
// a kNr-wide panel, 16 x 16 blocks at a time: full cache lines are read
// from each row and transposed in registers (the element-wise copy missed
// cache on every strided read and cost ~18% of an encoder's forward pass;
// F16 weights were widened into a whole tile first, then packed).
template <WKind kKind>
inline void PackPanelNkAvx512(const void* w, int64_t ldw, int64_t nv,
                              int64_t kc, float* panel) {
  for (int64_t j0 = 0; j0 < kNr; j0 += 16) {
    for (int64_t k0 = 0; k0 < kc; k0 += 16) {
      const int64_t kt = kc - k0 < 16 ? kc - k0 : 16;
      const __mmask16 mask = TailMask(kt);
      __m512 r[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        if (j0 + j >= nv) {
          r[j] = _mm512_setzero_ps();
        } else if constexpr (kKind == WKind::kBf16) {
          const uint16_t* src =
              static_cast<const uint16_t*>(w) + (j0 + j) * ldw + k0;
          r[j] = _mm512_castsi512_ps(_mm512_slli_epi32(
              _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, src)), 16));
        } else if constexpr (kKind == WKind::kF16) {
          const uint16_t* src =
              static_cast<const uint16_t*>(w) + (j0 + j) * ldw + k0;
          r[j] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, src));
        } else {
          r[j] = _mm512_maskz_loadu_ps(
              mask, static_cast<const float*>(w) + (j0 + j) * ldw + k0);
        }
      }
      Transpose16x16(r);
      for (int64_t t = 0; t < kt; ++t)
        _mm512_storeu_ps(panel + (k0 + t) * kNr + j0, r[t]);
    }
  }
}

// Hook of gemm_driver_impl.h: rows n0 .. n0+nv of a [n][k] weight into a
// panel (nv <= kNr; rows past nv are zero).
#define INFERD_GEMM_PACK_NK_PANEL 1
inline void PackPanelNk(const GemmArgs& g, int64_t n0, int64_t nv, int64_t k0,
                        int64_t kc, float* panel) {
  if (g.w_f16) {
    PackPanelNkAvx512<WKind::kF16>(
        static_cast<const uint16_t*>(g.w) + n0 * g.ldw + k0, g.ldw, nv, kc,
        panel);
  } else if (g.w_bf16) {
    PackPanelNkAvx512<WKind::kBf16>(
        static_cast<const uint16_t*>(g.w) + n0 * g.ldw + k0, g.ldw, nv, kc,
        panel);
  } else {
    PackPanelNkAvx512<WKind::kF32>(
        static_cast<const float*>(g.w) + n0 * g.ldw + k0, g.ldw, nv, kc,
        panel);
  }
}

#include "device/cpu/gemm_driver_impl.h"

// ---- BF16 weights with vdpbf16ps ----------------------------------------
// B panels hold K pairs: bp[kp][j] = (W[n+j][2kp], W[n+j][2kp+1]) as one
// 32-bit lane; A rows are pre-converted to BF16 pairs.

template <int MR>
void MicroBf16(int64_t kcp, const uint32_t* a, int64_t lda, const uint32_t* bp,
               float* c, int64_t ldc, int nvalid, bool init,
               const float* bias) {
  __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
  }
  for (int64_t kp = 0; kp < kcp; ++kp) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(bp + kp * kNr);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(bp + kp * kNr + 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512bh av =
          (__m512bh)_mm512_set1_epi32(static_cast<int>(a[i * lda + kp]));
      acc0[i] = _mm512_dpbf16_ps(acc0[i], av, b0);
      acc1[i] = _mm512_dpbf16_ps(acc1[i], av, b1);
    }
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    StoreTile(acc0[i], acc1[i], c + i * ldc, nvalid, init, bias);
  }
}

template <int MR>
inline void MicroDispatchBf16(int mr, int64_t kcp, const uint32_t* a,
                              int64_t lda, const uint32_t* bp, float* c,
                              int64_t ldc, int nvalid, bool init,
                              const float* bias) {
  if constexpr (MR >= 1) {
    if (mr == MR) {
      MicroBf16<MR>(kcp, a, lda, bp, c, ldc, nvalid, init, bias);
      return;
    }
    if constexpr (MR > 1) {
      MicroDispatchBf16<MR - 1>(mr, kcp, a, lda, bp, c, ldc, nvalid, init,
                                bias);
    }
  }
}

// K per block for BF16 pairs: a 32-column panel of 512 K is 32 KiB, as the
// F32 panel of kKc, and C is revisited half as often (K = 384 in one pass).
// Measured 1.3-1.8x at M = 4096 (K = 384 / 1536), neutral at M <= 512.
constexpr int64_t kKcBf16 = 2 * kKc;

struct Bf16Plan {
  GemmPlan base;
  const uint32_t* xa;  // [m, kp_total] BF16 pairs
  int64_t kp_total;
};

// Packs W(n0.., k0..) (HF layout, BF16) into pair panels.
void PackBPairs(const GemmArgs& g, int64_t n0, int64_t nc, int64_t k0,
                int64_t kc, uint32_t* bp) {
  const int64_t kcp = (kc + 1) / 2;
  const uint16_t* w = static_cast<const uint16_t*>(g.w);
  for (int64_t p = 0; p < nc; p += kNr) {
    uint32_t* panel = bp + p * kcp;
    for (int64_t j = 0; j < kNr; ++j) {
      if (p + j >= nc) {
        for (int64_t kp = 0; kp < kcp; ++kp) panel[kp * kNr + j] = 0;
        continue;
      }
      const uint16_t* src = w + (n0 + p + j) * g.ldw + k0;
      const int64_t full = kc / 2;
      for (int64_t kp = 0; kp < full; ++kp) {
        uint32_t pair;
        std::memcpy(&pair, src + 2 * kp, 4);
        panel[kp * kNr + j] = pair;
      }
      if (kc % 2 != 0) panel[full * kNr + j] = src[kc - 1];
    }
  }
}

void GemmBf16Task(void* arg, int64_t begin, int64_t end) {
  const Bf16Plan& plan = *static_cast<const Bf16Plan*>(arg);
  const GemmArgs& g = *plan.base.g;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t n0 = (t % plan.base.n_tasks) * plan.base.nc;
    const int64_t nc = g.n - n0 < plan.base.nc ? g.n - n0 : plan.base.nc;
    const int64_t m0 = (t / plan.base.n_tasks) * plan.base.mc;
    const int64_t m1 = g.m - m0 < plan.base.mc ? g.m : m0 + plan.base.mc;
    const int64_t nc_padded = (nc + kNr - 1) / kNr * kNr;
    // As GemmF32Task (kPackAllCBytes); packed K block k0 starts at
    // (k0 / 2) * nc_padded.
    const bool pack_all = (m1 - m0) * nc_padded * 4 > kPackAllCBytes;
    const int64_t chunk = pack_all ? kMc : m1 - m0;
    const int64_t kp_total = (g.k + 1) / 2;
    // Pairs packed at load: the panels of this task's columns are already
    // in the pack-all layout, one panel of kp_total pairs after another.
    const bool preloaded = g.packed_pairs != nullptr;
    uint32_t* bp = preloaded ? nullptr
                             : reinterpret_cast<uint32_t*>(ThreadScratch(
                                   (pack_all ? kp_total : kKcBf16 / 2) * nc_padded));
    for (int64_t k0 = 0; !preloaded && pack_all && k0 < g.k; k0 += kKcBf16) {
      const int64_t kc = g.k - k0 < kKcBf16 ? g.k - k0 : kKcBf16;
      PackBPairs(g, n0, nc, k0, kc, bp + k0 / 2 * nc_padded);
    }
    // As GemmF32Task: C tile of a row chunk in L2 across K blocks, a B panel
    // in L1 over the chunk's rows.
    for (int64_t mb = m0; mb < m1; mb += chunk) {
      const int64_t mb_end = m1 - mb < chunk ? m1 : mb + chunk;
      for (int64_t k0 = 0; k0 < g.k; k0 += kKcBf16) {
        const int64_t kc = g.k - k0 < kKcBf16 ? g.k - k0 : kKcBf16;
        const int64_t kcp = (kc + 1) / 2;
        if (!preloaded && !pack_all) PackBPairs(g, n0, nc, k0, kc, bp);
        for (int64_t p = 0; p < nc; p += kNr) {
          const int nv = static_cast<int>(nc - p < kNr ? nc - p : kNr);
          const uint32_t* panel =
              preloaded ? g.packed_pairs + (n0 + p) * kp_total + k0 / 2 * kNr
              : pack_all ? bp + k0 / 2 * nc_padded + p * kcp
                         : bp + p * kcp;
          for (int64_t m = mb; m < mb_end; m += kMr) {
            const int mr =
                static_cast<int>(mb_end - m < kMr ? mb_end - m : kMr);
            MicroDispatchBf16<kMr>(
                mr, kcp, plan.xa + m * plan.kp_total + k0 / 2, plan.kp_total,
                panel, g.y + m * g.ldy + n0 + p, g.ldy, nv, k0 == 0,
                g.bias != nullptr ? g.bias + n0 + p : nullptr);
          }
        }
      }
    }
  }
}

struct ConvertArgs {
  const GemmArgs* g;
  uint32_t* xa;
  int64_t kp_total;
};

// x rows -> BF16 pairs (round to nearest even), zero padded to even K.
void ConvertRowsTask(void* arg, int64_t begin, int64_t end) {
  const ConvertArgs& c = *static_cast<const ConvertArgs*>(arg);
  const GemmArgs& g = *c.g;
  for (int64_t m = begin; m < end; ++m) {
    const float* src = g.x + m * g.ldx;
    uint16_t* dst = reinterpret_cast<uint16_t*>(c.xa + m * c.kp_total);
    int64_t k = 0;
    for (; k + 16 <= g.k; k += 16) {
      const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + k));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), (__m256i)h);
    }
    if (k < g.k) {
      const __mmask16 mask = TailMask(g.k - k);
      const __m256bh h =
          _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, src + k));
      _mm256_mask_storeu_epi16(dst + k, mask, (__m256i)h);
    }
    if (g.k % 2 != 0) dst[g.k] = 0;
  }
}

// ---- Batch-1 decode GEMV with BF16 weights --------------------------------
// Memory-bound: each weight row is streamed in 64-byte lines (32 BF16). The
// two BF16 halves of every 32-bit lane become F32 with one shift / one mask
// (no widening shuffle), against x split once into even / odd elements per
// 32-wide block: xd[32 b + i] = x[32 b + 2 i], xd[32 b + 16 + i] =
// x[32 b + 2 i + 1].

struct GemvM1Args {
  const GemmArgs* g;
  const float* xd;  // deinterleaved x, full 32-blocks only
  int64_t k_full;   // K rounded down to a multiple of 32
};

template <int R>
inline void GemvBf16M1Block(const GemvM1Args& a, int64_t n) {
  const GemmArgs& g = *a.g;
  const uint16_t* w = static_cast<const uint16_t*>(g.w) + n * g.ldw;
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc[r][0] = _mm512_setzero_ps();
    acc[r][1] = _mm512_setzero_ps();
  }
  const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (int64_t k = 0; k < a.k_full; k += 32) {
    const __m512 xe = _mm512_load_ps(a.xd + k);
    const __m512 xo = _mm512_load_ps(a.xd + k + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i raw = _mm512_loadu_si512(w + r * g.ldw + k);
      const __m512 we = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
      const __m512 wo = _mm512_castsi512_ps(_mm512_and_si512(raw, hi_mask));
      acc[r][0] = _mm512_fmadd_ps(we, xe, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(wo, xo, acc[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    __m512 sum = _mm512_add_ps(acc[r][0], acc[r][1]);
    for (int64_t k = a.k_full; k < g.k; k += 16) {
      const __mmask16 mask = TailMask(g.k - k);
      const __m256i raw = _mm256_maskz_loadu_epi16(mask, w + r * g.ldw + k);
      const __m512 wv = _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
      sum = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(mask, g.x + k), sum);
    }
    const float b = g.bias != nullptr ? g.bias[n + r] : 0.0f;
    g.y[n + r] = _mm512_reduce_add_ps(sum) + b;
  }
}

void GemvBf16M1Task(void* arg, int64_t begin, int64_t end) {
  const GemvM1Args& a = *static_cast<const GemvM1Args*>(arg);
  int64_t n = begin;
  for (; n + 8 <= end; n += 8) GemvBf16M1Block<8>(a, n);
  for (; n < end; ++n) GemvBf16M1Block<1>(a, n);
}

// Per-thread buffer for the deinterleaved x (grows only).
float* XScratch(int64_t floats) {
  static thread_local float* buf = nullptr;
  static thread_local int64_t cap = 0;
  if (floats > cap) {
    std::free(buf);
    cap = (floats + 1023) / 1024 * 1024;
    buf = static_cast<float*>(std::aligned_alloc(64, cap * sizeof(float)));
  }
  return buf;
}

void GemvBf16M1(ThreadPool* pool, const GemmArgs& g) {
  GemvM1Args a;
  a.g = &g;
  a.k_full = g.k / 32 * 32;
  float* xd = XScratch(a.k_full > 0 ? a.k_full : 1);
  const __m512i even_idx = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14,
                                            12, 10, 8, 6, 4, 2, 0);
  const __m512i odd_idx = _mm512_add_epi32(even_idx, _mm512_set1_epi32(1));
  for (int64_t k = 0; k < a.k_full; k += 32) {
    const __m512 lo = _mm512_loadu_ps(g.x + k);
    const __m512 hi = _mm512_loadu_ps(g.x + k + 16);
    _mm512_store_ps(xd + k, _mm512_permutex2var_ps(lo, even_idx, hi));
    _mm512_store_ps(xd + k + 16, _mm512_permutex2var_ps(lo, odd_idx, hi));
  }
  a.xd = xd;
  if (g.n * g.k < kMinParallelMacs) pool = nullptr;
  const int64_t min_rows = kMinParallelMacs / g.k + 1;
  ParallelForRaw(pool, g.n, min_rows > 16 ? min_rows : 16, &GemvBf16M1Task, &a);
}

// ---- Small-M (decode batch) GEMM ------------------------------------------
// For kGemvMaxM < M <= kSmallMMaxM every weight row is read from memory once:
// a block of kSmallMR rows is loaded per K step and dotted against a chunk
// of up to kSmallMB activation rows (the block stays in L1/L2 for the later
// chunks; activations stay in L2). Each (row, column) pair accumulates one
// vector of partial sums, reduced horizontally at the end. No weight
// packing, so the cost is max(weight bytes / bandwidth, FLOPs / peak).
// kDot: BF16 weights with vdpbf16ps against activations rounded to BF16
// pairs once per call (the blocked BF16 path rounds them the same way);
// kF32 / kBf16Widen: F32 FMA, BF16 weights widened to F32.
enum class SmallMKind { kDot, kF32, kBf16Widen };

// Largest M for the kF32 / kBf16Widen kinds (kDot: kSmallMMaxM).
constexpr int64_t kSmallMMaxMF32 = 32;

// 24 accumulators + 4 weight vectors + 1 activation vector fit the 32
// registers; 8 x 3 needs 33 and spills (4x slower).
constexpr int kSmallMR = 4;  // weight rows per block
constexpr int kSmallMB = 6;  // activation rows per chunk

struct SmallMArgs {
  const GemmArgs* g;
  const uint32_t* xa;  // kDot: [m, kps] BF16 pairs, zero padded
  int64_t kps;         // kDot: pairs per row, a multiple of 16
};

// Horizontal sums of four vectors: lanes 0..3 = sums of a, b, c, d.
inline __m128 Reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  auto half = [](__m512 v) {
    return _mm256_add_ps(
        _mm512_castps512_ps256(v),
        _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  };
  const __m256 ab = _mm256_hadd_ps(half(a), half(b));
  const __m256 cd = _mm256_hadd_ps(half(c), half(d));
  const __m256 abcd = _mm256_hadd_ps(ab, cd);
  return _mm_add_ps(_mm256_castps256_ps128(abcd),
                    _mm256_extractf128_ps(abcd, 1));
}

// Chunk c of a block prefetches rows [r_begin, r_end) of the next block
// into L2: a row of 2048 BF16 is one 4 KiB page, where the hardware stream
// prefetcher stops (1.5-2x at M = 16, N = 5632, K = 2048); spreading the
// rows over the chunks keeps the request rate near the memory bandwidth,
// and L2 rather than L1 keeps the current block's rows in L1.
template <SmallMKind kKind, int MB, int R>
void SmallMBlock(const SmallMArgs& a, int64_t n, int64_t m0, int r_begin,
                 int r_end) {
  const GemmArgs& g = *a.g;
  const bool prefetch = r_begin < r_end && n + 2 * R <= g.n;
  __m512 acc[R][MB];
#pragma GCC unroll 6
  for (int m = 0; m < MB; ++m)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r][m] = _mm512_setzero_ps();
  if constexpr (kKind == SmallMKind::kDot) {
    const uint16_t* w = static_cast<const uint16_t*>(g.w) + n * g.ldw;
    const uint32_t* x = a.xa + m0 * a.kps;
    // 32 BF16 = 16 pairs per step; the tail loads zero weights beyond K,
    // against zero-padded activations.
    for (int64_t k = 0; k < g.k; k += 32) {
      if (prefetch) {
#pragma GCC unroll 4
        for (int r = r_begin; r < r_end; ++r)
          _mm_prefetch(reinterpret_cast<const char*>(w + (r + R) * g.ldw + k),
                       _MM_HINT_T1);
      }
      const int64_t left = g.k - k;
      const __mmask32 mask = left >= 32
                                 ? static_cast<__mmask32>(0xffffffffu)
                                 : static_cast<__mmask32>((1u << left) - 1);
      __m512bh wv[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        wv[r] = (__m512bh)_mm512_maskz_loadu_epi16(mask, w + r * g.ldw + k);
#pragma GCC unroll 6
      for (int m = 0; m < MB; ++m) {
        const __m512bh xv = (__m512bh)_mm512_load_si512(x + m * a.kps + k / 2);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
          acc[r][m] = _mm512_dpbf16_ps(acc[r][m], wv[r], xv);
      }
    }
  } else {
    const int64_t wsize = kKind == SmallMKind::kF32 ? 4 : 2;
    const char* wbytes = static_cast<const char*>(g.w) + n * g.ldw * wsize;
    for (int64_t k = 0; k < g.k; k += 16) {
      // One line per row per 64 bytes of weights.
      if (prefetch && (k * wsize) % 64 == 0) {
#pragma GCC unroll 4
        for (int r = r_begin; r < r_end; ++r)
          _mm_prefetch(wbytes + ((r + R) * g.ldw + k) * wsize, _MM_HINT_T1);
      }
      const __mmask16 mask = TailMask(g.k - k);
      __m512 wv[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        if constexpr (kKind == SmallMKind::kBf16Widen) {
          const __m256i raw = _mm256_maskz_loadu_epi16(
              mask, static_cast<const uint16_t*>(g.w) + (n + r) * g.ldw + k);
          wv[r] = _mm512_castsi512_ps(
              _mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
        } else {
          wv[r] = _mm512_maskz_loadu_ps(
              mask, static_cast<const float*>(g.w) + (n + r) * g.ldw + k);
        }
      }
#pragma GCC unroll 6
      for (int m = 0; m < MB; ++m) {
        const __m512 xv =
            _mm512_maskz_loadu_ps(mask, g.x + (m0 + m) * g.ldx + k);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
          acc[r][m] = _mm512_fmadd_ps(wv[r], xv, acc[r][m]);
      }
    }
  }
  if constexpr (R % 4 == 0) {
#pragma GCC unroll 2
    for (int r = 0; r < R; r += 4) {
      const __m128 b =
          g.bias != nullptr ? _mm_loadu_ps(g.bias + n + r) : _mm_setzero_ps();
#pragma GCC unroll 6
      for (int m = 0; m < MB; ++m) {
        const __m128 sum =
            Reduce4(acc[r][m], acc[r + 1][m], acc[r + 2][m], acc[r + 3][m]);
        _mm_storeu_ps(g.y + (m0 + m) * g.ldy + n + r, _mm_add_ps(sum, b));
      }
    }
  } else {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float b = g.bias != nullptr ? g.bias[n + r] : 0.0f;
#pragma GCC unroll 6
      for (int m = 0; m < MB; ++m)
        g.y[(m0 + m) * g.ldy + n + r] = _mm512_reduce_add_ps(acc[r][m]) + b;
    }
  }
}

template <SmallMKind kKind, int R>
void SmallMChunk(const SmallMArgs& a, int64_t n, int64_t m0, int mb,
                 int r_begin, int r_end) {
  switch (mb) {
    case 1:
      SmallMBlock<kKind, 1, R>(a, n, m0, r_begin, r_end);
      break;
    case 2:
      SmallMBlock<kKind, 2, R>(a, n, m0, r_begin, r_end);
      break;
    case 3:
      SmallMBlock<kKind, 3, R>(a, n, m0, r_begin, r_end);
      break;
    case 4:
      SmallMBlock<kKind, 4, R>(a, n, m0, r_begin, r_end);
      break;
    case 5:
      SmallMBlock<kKind, 5, R>(a, n, m0, r_begin, r_end);
      break;
    default:
      SmallMBlock<kKind, 6, R>(a, n, m0, r_begin, r_end);
      break;
  }
}

// Columns [begin, end) of y: blocks of kSmallMR weight rows, M split into
// near-equal chunks of <= kSmallMB rows (16 = 6 + 5 + 5, not 6 + 6 + 4).
template <SmallMKind kKind>
void SmallMTask(void* arg, int64_t begin, int64_t end) {
  const SmallMArgs& a = *static_cast<const SmallMArgs*>(arg);
  const int64_t m = a.g->m;
  const int64_t chunks = (m + kSmallMB - 1) / kSmallMB;
  int64_t n = begin;
  for (; n + kSmallMR <= end; n += kSmallMR) {
    for (int64_t c = 0, m0 = 0; c < chunks; ++c) {
      const int64_t m1 = m * (c + 1) / chunks;
      SmallMChunk<kKind, kSmallMR>(
          a, n, m0, static_cast<int>(m1 - m0),
          static_cast<int>(kSmallMR * c / chunks),
          static_cast<int>(kSmallMR * (c + 1) / chunks));
      m0 = m1;
    }
  }
  for (; n < end; ++n) {
    for (int64_t c = 0, m0 = 0; c < chunks; ++c) {
      const int64_t m1 = m * (c + 1) / chunks;
      SmallMChunk<kKind, 1>(a, n, m0, static_cast<int>(m1 - m0), 0, 0);
      m0 = m1;
    }
  }
}

void SmallMGemm(ThreadPool* pool, const GemmArgs& g, bool use_bf16_dot) {
  if (g.m * g.n * g.k < kMinParallelMacs) pool = nullptr;
  SmallMArgs a{&g, nullptr, 0};
  // Chunks of whole kSmallMR blocks; >= kMinParallelMacs each.
  int64_t min_rows = kMinParallelMacs / (g.m * g.k) + 1;
  min_rows = (min_rows + kSmallMR - 1) / kSmallMR * kSmallMR;
  if (min_rows < 16) min_rows = 16;
  if (!g.w_bf16) {
    ParallelForRaw(pool, g.n, min_rows, &SmallMTask<SmallMKind::kF32>, &a);
    return;
  }
  if (!use_bf16_dot) {
    ParallelForRaw(pool, g.n, min_rows, &SmallMTask<SmallMKind::kBf16Widen>,
                   &a);
    return;
  }
  a.kps = ((g.k + 1) / 2 + 15) / 16 * 16;
  const int64_t bytes = g.m * a.kps * 4;
  uint32_t* xa = static_cast<uint32_t*>(std::aligned_alloc(64, bytes));
  std::memset(xa, 0, bytes);
  ConvertArgs conv{&g, xa, a.kps};
  ConvertRowsTask(&conv, 0, g.m);
  a.xa = xa;
  ParallelForRaw(pool, g.n, min_rows, &SmallMTask<SmallMKind::kDot>, &a);
  std::free(xa);
}

}  // namespace

namespace {

// Chains per loop: enough independent accumulators to cover the latency
// of either instruction on two ports.
constexpr int kRateChains = 16;
constexpr int kRateIters = 20000;

// Seconds for kRateIters x kRateChains vdpbf16ps (kDot) or vfmadd (!kDot).
template <bool kDot>
double TimeRateLoop() {
  __m512 acc[kRateChains];
  for (int j = 0; j < kRateChains; ++j) acc[j] = _mm512_set1_ps(0.001f * j);
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-6f);
  const __m512bh ah = _mm512_cvtne2ps_pbh(a, a), bh = _mm512_cvtne2ps_pbh(b, b);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kRateIters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kRateChains; ++j) {
      if constexpr (kDot) {
        acc[j] = _mm512_dpbf16_ps(acc[j], ah, bh);
      } else {
        acc[j] = _mm512_fmadd_ps(acc[j], a, b);
      }
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The sums are used, so the chains cannot be dropped.
  float sink = 0;
  for (int j = 0; j < kRateChains; ++j) sink += _mm512_reduce_add_ps(acc[j]);
  __asm__ volatile("" : : "x"(sink));
  return s;
}

}  // namespace

double MeasureBf16DotToFmaRate() {
  // Best (shortest) of alternating runs: a run preempted by another process
  // only ever gets longer.
  double dot = 1e30, fma = 1e30;
  for (int r = 0; r < 9; ++r) {
    fma = std::min(fma, TimeRateLoop<false>());
    dot = std::min(dot, TimeRateLoop<true>());
  }
  // vdpbf16ps: 16 lanes x 2 products x 2 FLOP; vfmadd: 16 lanes x 2 FLOP.
  return (64.0 / dot) / (32.0 / fma);
}

int64_t PackedF32Floats(int64_t n, int64_t k) {
  return (n + kNr - 1) / kNr * k * kNr;
}

namespace {
struct PackF32Job {
  const GemmArgs* g;
  float* out;
};
void PackF32PanelsTask(void* arg, int64_t begin, int64_t end) {
  const PackF32Job& job = *static_cast<const PackF32Job*>(arg);
  const GemmArgs& g = *job.g;
  for (int64_t p = begin; p < end; ++p) {
    const int64_t n0 = p * kNr;
    const int64_t nv = g.n - n0 < kNr ? g.n - n0 : kNr;
    PackPanelNkAvx512<WKind::kF32>(static_cast<const float*>(g.w) + n0 * g.ldw,
                             g.ldw, nv, g.k, job.out + n0 * g.k);
  }
}
}  // namespace

void PackF32Panels(ThreadPool* pool, const GemmArgs& g, float* out) {
  PackF32Job job{&g, out};
  ParallelForRaw(pool, (g.n + kNr - 1) / kNr, 1, &PackF32PanelsTask, &job);
}

int64_t PackedBf16PairWords(int64_t n, int64_t k) {
  return (n + kNr - 1) / kNr * ((k + 1) / 2) * kNr;
}

namespace {
struct PackPairsJob {
  const GemmArgs* g;
  uint32_t* out;
};
void PackBf16PairsTask(void* arg, int64_t begin, int64_t end) {
  const PackPairsJob& job = *static_cast<const PackPairsJob*>(arg);
  const GemmArgs& g = *job.g;
  const int64_t kp = (g.k + 1) / 2;
  for (int64_t p = begin; p < end; ++p) {
    const int64_t n0 = p * kNr;
    PackBPairs(g, n0, g.n - n0 < kNr ? g.n - n0 : kNr, 0, g.k, job.out + n0 * kp);
  }
}
}  // namespace

void PackBf16Pairs(ThreadPool* pool, const GemmArgs& g, uint32_t* out) {
  PackPairsJob job{&g, out};
  ParallelForRaw(pool, (g.n + kNr - 1) / kNr, 1, &PackBf16PairsTask, &job);
}

void Gemm(ThreadPool* pool, const GemmArgs& g, bool use_bf16_dot) {
  if (g.w_f16) {
    // Only the blocked GEMM reads F16 (m > kGemvMaxM, see GemmArgs; no
    // small-M path: small_m_max 0).
    RunGemmF32(pool, g, 0);
    return;
  }
  if (g.packed != nullptr && !g.w_bf16 && g.m > kGemvMaxM) {
    // Panels packed at load: the blocked GEMM without its packing pass
    // also beats streaming the weights for small M.
    RunGemmF32(pool, g, kGemvMaxM);
    return;
  }
  if (g.m == 1 && g.w_bf16 && g.w_layout_nk) {
    GemvBf16M1(pool, g);
    return;
  }
  // F32 FMA streams at about half the vdpbf16ps rate: at M = 64 it only
  // ties the blocked GEMM (1.3-2x faster at M = 16 / 32).
  const bool dot = use_bf16_dot && g.w_bf16;
  // Pairs packed at load: the blocked GEMM for every M above the GEMV's
  // (as the F32 panels).
  const bool preloaded = dot && g.packed_pairs != nullptr && g.w_layout_nk;
  const int64_t small_m_max = dot ? kSmallMMaxM : kSmallMMaxMF32;
  if (!preloaded && g.m > kGemvMaxM && g.m <= small_m_max && g.w_layout_nk) {
    SmallMGemm(pool, g, use_bf16_dot);
    return;
  }
  if (!(use_bf16_dot && g.w_bf16 && g.w_layout_nk && g.m > kGemvMaxM)) {
    RunGemmF32(pool, g, kGemvMaxM);
    return;
  }
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  Bf16Plan plan;
  plan.base = MakePlan(g, threads);
  plan.kp_total = (g.k + 1) / 2;
  // kKcBf16 is even, so K blocks start on pair boundaries.
  uint32_t* xa = static_cast<uint32_t*>(
      std::aligned_alloc(64, ((g.m * plan.kp_total * 4 + 63) / 64) * 64));
  ConvertArgs conv{&g, xa, plan.kp_total};
  ParallelForRaw(pool, g.m, 16, &ConvertRowsTask, &conv);
  plan.xa = xa;
  const int64_t m_tasks = (g.m + plan.base.mc - 1) / plan.base.mc;
  ParallelForRaw(pool, plan.base.n_tasks * m_tasks, 1, &GemmBf16Task, &plan);
  std::free(xa);
}

}  // namespace cpu_avx512
}  // namespace inferd
