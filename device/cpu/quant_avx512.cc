// Quantized / F16 weight GEMV and small-M GEMM for Linear at the avx512
// level, 512-bit kernels with F32 activations and F32 math:
// - M = 1 (decode): weight rows stream once, four rows per pass (independent
//   accumulator chains, shared activation loads), each pass prefetching the
//   next one's rows. 4-bit blocks become F32 through a 16-entry table per
//   block or sub-block (vpermps indexed by the nibbles: table[q] = d q +
//   offset), so the offsets need no activation sums and the decode is one
//   shuffle per 16 weights; Q8_0 and Q6_K convert integers (vcvtdq2ps) and
//   scale per block (Q6_K: per 16 values).
// - M = 1 with Q4_0 / Q4_1 / Q8_0 / Q4_K / Q6_K when the CPU has AVX512_VNNI (chosen by
//   quant_linear_cpu.cc at the avx512_bf16 level): int8 dot products
//   (vpdpbusd) on the blocks as stored, against x quantized per block of 32
//   to 16 bits as two int8 levels (GemvVnniRows; the F32 kernels above stay
//   the avx512 level's and the other formats' path).
// - M >= 2 (batched decode): a chunk of 4 weight rows x 256 values is decoded
//   once into an L1-resident F32 panel (the values DequantizeRow gives) and
//   run against all M activation rows with a 4 x 4 register tile.
// - Prefill (large M): Q8_0 / Q4_0 / Q4_1 / Q4_K / Q6_K with int8 dot products
//   (vpdpbusd) against activations quantized per block of 32
//   (QuantGemmVnni); the other formats decode weight tiles to F32 with the
//   kernels above (DecodeRowsF32) for the F32 GEMM.
// Compiled with AVX-512 flags and called only after the run-time CPU check;
// internal-linkage helpers and raw pointers only (see device/CMakeLists.txt).
#include <immintrin.h>

#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "device/cpu/quant_gemm.h"
#include "device/cpu/transpose_avx512_impl.h"

namespace inferd {
namespace cpu_avx512 {
namespace {

// Blocks whose f16 scales are converted to F32 per pass of the GEMV (a
// multiple of 16).
constexpr int kScaleGroup = 64;
// Weight rows per GEMV pass (independent accumulator chains and memory
// streams sharing the activation loads).
constexpr int kGemvRows = 4;
// Activation rows per tile of the int8 GEMV (M >= 2 under the int8 policy).
constexpr int kGemvXRows = 4;
// Weight rows per chunk of the int8 GEMV at M >= 2 (a multiple of kGemvRows).
constexpr int64_t kGemvChunkRows = 32;
// Batched path: weight rows and K values per decoded panel, activation
// rows per register tile.
constexpr int kPanelRows = 4;
constexpr int64_t kPanelK = 256;
constexpr int kTileM = 4;

inline __m512 Iota() {
  return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

inline __m512i U8x16(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512i I8x16(const void* p) {
  return _mm512_cvtepi8_epi32(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// out[j] = the f16 at p + stride * j as F32, j < count <= kScaleGroup (the
// rest up to a multiple of 16: 0). All halves are packed before the first
// is converted: a 32-byte load of 16 just-stored halves cannot be
// store-forwarded and waits for the stores to commit, once per call.
inline void HalvesToFloats(const uint8_t* p, size_t stride, int count,
                           float* out) {
  alignas(32) uint16_t h[kScaleGroup];
  const int padded = (count + 15) / 16 * 16;
  for (int j = count; j < padded; ++j) h[j] = 0;
  for (int j = 0; j < count; ++j) {
    uint16_t v;
    std::memcpy(&v, p + stride * j, 2);
    // Keeps the copy scalar (loads and stores): vectorized, GCC builds the
    // vector with vpinsrw, which competes with the kernel for port 5.
    asm("" : "+r"(v));
    h[j] = v;
  }
  for (int j = 0; j < padded; j += 16) {
    _mm512_store_ps(out + j, _mm512_cvtph_ps(_mm256_load_si256(
                                 reinterpret_cast<const __m256i*>(h + j))));
  }
}

// Q4_1: d[j] and m[j] from the f16 pair at p + stride * j, as
// HalvesToFloats (one 32-bit copy per block).
inline void HalfPairsToFloats(const uint8_t* p, size_t stride, int count,
                              float* d, float* m) {
  alignas(64) uint32_t h[kScaleGroup];
  const int padded = (count + 15) / 16 * 16;
  for (int j = count; j < padded; ++j) h[j] = 0;
  for (int j = 0; j < count; ++j) {
    uint32_t v;
    std::memcpy(&v, p + stride * j, 4);
    asm("" : "+r"(v));
    h[j] = v;
  }
  for (int j = 0; j < padded; j += 16) {
    const __m512i v = _mm512_load_si512(h + j);
    _mm512_store_ps(d + j, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)));
    _mm512_store_ps(m + j, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16))));
  }
}

// Into L2 (prefetcht2), not L1: weights streamed by the GEMVs are read once,
// and on the AMD EPYC (Zen 4) of 2026-11-27 T0 prefetches kept the loop
// from overlapping memory and compute (BM_QuantLinear M = 1, 5632 x 2048,
// one thread: q4_0 9.1 -> 14.0 GB/s, q8_0 10.3 -> 19.0; two threads q4_0
// ~17 -> ~23, f16 19.3 -> 25.3).
inline void Prefetch(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T2);
}

inline float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// ---- 4-bit GEMV nibble order ----------------------------------------------
// The GEMV broadcasts a block's 16 nibble bytes to the four 128-bit lanes
// (a load, no shuffle) and shifts lane L's dwords right by 8 L (+ 4 for the
// high nibbles): vector lane j = 4 L + p then indexes with byte 4 p + L,
// i.e. element 4 p + L of each 16 (a 4 x 4 transpose). x is transposed the
// same way once per call (XNibbleOrder), so no vpmovzxbd competes with
// vpermps for port 5. Used by Q4_1 and Q4_K; Q4_0, whose loop has one op
// less, measured faster with vpmovzxbd (BM_QuantLinearL2), and keeps it.

inline __m512i NibbleShift(int extra) {
  return _mm512_add_epi32(
      _mm512_setr_epi32(0, 0, 0, 0, 8, 8, 8, 8, 16, 16, 16, 16, 24, 24, 24, 24),
      _mm512_set1_epi32(extra));
}

// Lane j of the result: byte (4 (j % 4) + j / 4) of the 16 at p, shifted
// right by `shift` - the low bits index vpermps.
inline __m512i NibbleIndex(__m512i bytes, __m512i shift) {
  return _mm512_srlv_epi32(bytes, shift);
}

inline __m512i Bytes16(const uint8_t* p) {
  return _mm512_broadcast_i32x4(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// xt[16 g + j] = x[16 g + 4 (j % 4) + j / 4], k a multiple of 16. Owned by
// the calling thread (valid until its next call).
const float* XNibbleOrder(const float* x, int64_t k) {
  static thread_local std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < k) buf.resize(k);
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10,
                                        14, 3, 7, 11, 15);
  for (int64_t p = 0; p < k; p += 16) {
    _mm512_storeu_ps(buf.data() + p,
                     _mm512_permutexvar_ps(idx, _mm512_loadu_ps(x + p)));
  }
  return buf.data();
}

// ---- Q4_0 / Q4_1 ----------------------------------------------------------

// Table of a Q4_0 (x = d (q - 8)) or Q4_1 (x = d q + m) block.
template <bool kQ4_0>
inline __m512 Q4Table(float d, float m) {
  if (kQ4_0) {
    return _mm512_mul_ps(_mm512_set1_ps(d),
                         _mm512_sub_ps(Iota(), _mm512_set1_ps(8.0f)));
  }
  return _mm512_fmadd_ps(_mm512_set1_ps(d), Iota(), _mm512_set1_ps(m));
}

// out[r] = dot(row w[r], x) for R rows of nb Q4_0 / Q4_1 blocks.
template <int R, bool kQ4_0>
void GemvQ4(const uint8_t* const* w, int64_t nb, const float* x,
            size_t ahead, float* out) {
  constexpr int kBytes = kQ4_0 ? 18 : 20;
  constexpr int kQs = kQ4_0 ? 2 : 4;
  const __m512 iota = Iota();
  const __m512 iota8 = _mm512_sub_ps(iota, _mm512_set1_ps(8.0f));
  const __m512i shift_lo = NibbleShift(0), shift_hi = NibbleShift(4);
  __m512 lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm512_setzero_ps();
  alignas(64) float d[R][kScaleGroup], m[R][kScaleGroup];
  for (int64_t g = 0; g < nb; g += kScaleGroup) {
    const int count =
        nb - g < kScaleGroup ? static_cast<int>(nb - g) : kScaleGroup;
    for (int r = 0; r < R; ++r) {
      if (kQ4_0) {
        HalvesToFloats(w[r] + kBytes * g, kBytes, count, d[r]);
      } else {
        HalfPairsToFloats(w[r] + kBytes * g, kBytes, count, d[r], m[r]);
      }
    }
    for (int j = 0; j < count; ++j) {
      const float* xb = x + 32 * (g + j);
      const __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = w[r] + kBytes * (g + j);
        Prefetch(blk + ahead);
        const __m512i q = kQ4_0 ? U8x16(blk + kQs) : Bytes16(blk + kQs);
        const __m512 t =
            kQ4_0 ? _mm512_mul_ps(_mm512_set1_ps(d[r][j]), iota8)
                  : _mm512_fmadd_ps(_mm512_set1_ps(d[r][j]), iota,
                                    _mm512_set1_ps(m[r][j]));
        // vpermps reads the low 4 bits of each index.
        const __m512i i_lo = kQ4_0 ? q : NibbleIndex(q, shift_lo);
        const __m512i i_hi =
            kQ4_0 ? _mm512_srli_epi32(q, 4) : NibbleIndex(q, shift_hi);
        lo[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(i_lo, t), x0, lo[r]);
        hi[r] = _mm512_fmadd_ps(_mm512_permutexvar_ps(i_hi, t), x1, hi[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    out[r] = _mm512_reduce_add_ps(_mm512_add_ps(lo[r], hi[r]));
  }
}

template <bool kQ4_0>
void DecodeQ4(const uint8_t* w, int64_t b0, int64_t nb, float* out) {
  constexpr int kBytes = kQ4_0 ? 18 : 20;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + kBytes * (b0 + b);
    const __m512 t = Q4Table<kQ4_0>(HalfAt(blk), kQ4_0 ? 0.0f : HalfAt(blk + 2));
    const __m512i q = U8x16(blk + (kQ4_0 ? 2 : 4));
    _mm512_store_ps(out + 32 * b, _mm512_permutexvar_ps(q, t));
    _mm512_store_ps(out + 32 * b + 16,
                    _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), t));
  }
}

// ---- Q5_0 / Q5_1 ------------------------------------------------------------

// Blocks [b0, b0 + nb) of a Q5_0 (x = d (q - 16)) or Q5_1 (x = d q + m) row
// as F32, as DequantizeRow computes them: q = the nibble plus bit j of the
// block's 32-bit qh as bit 4 of value j.
template <bool kWithMin>
void DecodeQ5(const uint8_t* w, int64_t b0, int64_t nb, float* out) {
  constexpr int64_t kBytes = kWithMin ? 24 : 22;
  const __m512i sixteen = _mm512_set1_epi32(16);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + (b0 + b) * kBytes;
    uint32_t qh;
    std::memcpy(&qh, blk + (kWithMin ? 4 : 2), 4);
    const uint8_t* qs = blk + (kWithMin ? 8 : 6);
    const __m512i v = U8x16(qs);
    const __m512i lo = _mm512_and_si512(v, _mm512_set1_epi32(0x0F));
    const __m512i hi = _mm512_srli_epi32(v, 4);
    const __m512i q0 = _mm512_mask_add_epi32(lo, static_cast<__mmask16>(qh), lo, sixteen);
    const __m512i q1 = _mm512_mask_add_epi32(hi, static_cast<__mmask16>(qh >> 16), hi, sixteen);
    const __m512 d = _mm512_set1_ps(HalfAt(blk));
    float* o = out + 32 * b;
    if (kWithMin) {
      const __m512 m = _mm512_set1_ps(HalfAt(blk + 2));
      _mm512_storeu_ps(o, _mm512_add_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(q0)), m));
      _mm512_storeu_ps(o + 16, _mm512_add_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(q1)), m));
    } else {
      _mm512_storeu_ps(o, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(q0, sixteen))));
      _mm512_storeu_ps(o + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(q1, sixteen))));
    }
  }
}

// ---- Q8_0 ------------------------------------------------------------------

template <int R>
void GemvQ8_0(const uint8_t* const* w, int64_t nb, const float* x,
              size_t ahead, float* out) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  alignas(64) float d[R][kScaleGroup];
  for (int64_t g = 0; g < nb; g += kScaleGroup) {
    const int count =
        nb - g < kScaleGroup ? static_cast<int>(nb - g) : kScaleGroup;
    for (int r = 0; r < R; ++r) HalvesToFloats(w[r] + 34 * g, 34, count, d[r]);
    for (int j = 0; j < count; ++j) {
      const float* xb = x + 32 * (g + j);
      const __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uint8_t* q = w[r] + 34 * (g + j) + 2;
        Prefetch(q + ahead);
        Prefetch(q + ahead + 32);
        __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(I8x16(q)), x0);
        t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I8x16(q + 16)), x1, t);
        acc[r][j & 1] = _mm512_fmadd_ps(t, _mm512_set1_ps(d[r][j]), acc[r][j & 1]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
  }
}

void DecodeQ8_0(const uint8_t* w, int64_t b0, int64_t nb, float* out) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + 34 * (b0 + b);
    const __m512 d = _mm512_set1_ps(HalfAt(blk));
    _mm512_store_ps(out + 32 * b,
                    _mm512_mul_ps(d, _mm512_cvtepi32_ps(I8x16(blk + 2))));
    _mm512_store_ps(out + 32 * b + 16,
                    _mm512_mul_ps(d, _mm512_cvtepi32_ps(I8x16(blk + 18))));
  }
}

// ---- Q4_K ------------------------------------------------------------------

// [sc_0..7, m_0..7] of a Q4_K super-block as int32 lanes (the 6-bit values
// unpacked four at a time in 32-bit words).
inline __m512i ScaleMinsQ4_K(const uint8_t* blk) {
  uint32_t u[3];
  std::memcpy(u, blk + 4, 12);
  const uint32_t sc_lo = u[0] & 0x3F3F3F3Fu;
  const uint32_t m_lo = u[1] & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4);
  return _mm512_cvtepu8_epi32(_mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi),
                                             static_cast<int>(m_lo), static_cast<int>(m_hi)));
}

// The 8 sub-block scales d * sc (out[0..7]) and offsets dmin * m (out[8..15])
// of a Q4_K super-block.
inline void ScalesQ4_K(const uint8_t* blk, float* out) {
  const __m512 dd = _mm512_insertf32x8(_mm512_set1_ps(HalfAt(blk)),
                                       _mm256_set1_ps(HalfAt(blk + 2)), 1);
  _mm512_store_ps(out, _mm512_mul_ps(dd, _mm512_cvtepi32_ps(ScaleMinsQ4_K(blk))));
}

template <int R>
void GemvQ4_K(const uint8_t* const* w, int64_t nsb, const float* x,
              size_t ahead, float* out) {
  const __m512 iota = Iota();
  const __m512i shift_lo = NibbleShift(0), shift_hi = NibbleShift(4);
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  alignas(64) float s[R][16];
  for (int64_t sb = 0; sb < nsb; ++sb) {
    for (int r = 0; r < R; ++r) ScalesQ4_K(w[r] + 144 * sb, s[r]);
    for (int p = 0; p < 4; ++p) {
      const float* xp = x + 256 * sb + 64 * p;
      const __m512 x0 = _mm512_loadu_ps(xp), x1 = _mm512_loadu_ps(xp + 16),
                   x2 = _mm512_loadu_ps(xp + 32), x3 = _mm512_loadu_ps(xp + 48);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uint8_t* q = w[r] + 144 * sb + 16 + 32 * p;
        Prefetch(q + ahead);
        const __m512i v0 = Bytes16(q), v1 = Bytes16(q + 16);
        const __m512 ta = _mm512_fmsub_ps(_mm512_set1_ps(s[r][2 * p]), iota,
                                          _mm512_set1_ps(s[r][8 + 2 * p]));
        const __m512 tb = _mm512_fmsub_ps(_mm512_set1_ps(s[r][2 * p + 1]), iota,
                                          _mm512_set1_ps(s[r][9 + 2 * p]));
        acc[r][0] = _mm512_fmadd_ps(
            _mm512_permutexvar_ps(NibbleIndex(v0, shift_lo), ta), x0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(
            _mm512_permutexvar_ps(NibbleIndex(v1, shift_lo), ta), x1, acc[r][1]);
        acc[r][0] = _mm512_fmadd_ps(
            _mm512_permutexvar_ps(NibbleIndex(v0, shift_hi), tb), x2, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(
            _mm512_permutexvar_ps(NibbleIndex(v1, shift_hi), tb), x3, acc[r][1]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
  }
}

void DecodeQ4_K(const uint8_t* w, int64_t sb, float* out) {
  const __m512 iota = Iota();
  const uint8_t* blk = w + 144 * sb;
  alignas(64) float s[16];
  ScalesQ4_K(blk, s);
  for (int p = 0; p < 4; ++p) {
    const __m512i v0 = U8x16(blk + 16 + 32 * p), v1 = U8x16(blk + 32 + 32 * p);
    // As DequantizeRow: (d sc) q - (dmin m), each product rounded.
    const __m512 ta = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(s[2 * p]), iota),
                                    _mm512_set1_ps(s[8 + 2 * p]));
    const __m512 tb = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(s[2 * p + 1]), iota),
                                    _mm512_set1_ps(s[9 + 2 * p]));
    float* o = out + 64 * p;
    _mm512_store_ps(o, _mm512_permutexvar_ps(v0, ta));
    _mm512_store_ps(o + 16, _mm512_permutexvar_ps(v1, ta));
    _mm512_store_ps(o + 32, _mm512_permutexvar_ps(_mm512_srli_epi32(v0, 4), tb));
    _mm512_store_ps(o + 48, _mm512_permutexvar_ps(_mm512_srli_epi32(v1, 4), tb));
  }
}

// ---- Q6_K ------------------------------------------------------------------

// The 256 values of a Q6_K super-block as int8 q - 32 in order (q[v]), and
// its 16 scales d * sc as F32.
inline void UnpackQ6_K(const uint8_t* blk, int8_t* q, float* s) {
  const __m512i low = _mm512_set1_epi8(0x0F), two = _mm512_set1_epi8(0x30),
                off = _mm512_set1_epi8(32);
  for (int h = 0; h < 2; ++h) {
    // ql[0..63]: low nibbles are values 0..63 of the half, high ones
    // 64..127; qh[l] holds the high 2 bits of values l, l + 32, l + 64,
    // l + 96 at bits 0, 2, 4, 6. hx = [qh, qh >> 2] lines them up with ql.
    const __m512i l = _mm512_loadu_si512(blk + 64 * h);
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
    const __m512i hx = _mm512_inserti64x4(_mm512_castsi256_si512(qh),
                                          _mm256_srli_epi16(qh, 2), 1);
    const __m512i q01 = _mm512_or_si512(
        _mm512_and_si512(l, low), _mm512_and_si512(_mm512_slli_epi16(hx, 4), two));
    const __m512i q23 = _mm512_or_si512(
        _mm512_and_si512(_mm512_srli_epi16(l, 4), low), _mm512_and_si512(hx, two));
    _mm512_storeu_si512(q + 128 * h, _mm512_sub_epi8(q01, off));
    _mm512_storeu_si512(q + 128 * h + 64, _mm512_sub_epi8(q23, off));
  }
  _mm512_store_ps(s, _mm512_mul_ps(_mm512_set1_ps(HalfAt(blk + 208)),
                                   _mm512_cvtepi32_ps(I8x16(blk + 192))));
}

template <int R>
void GemvQ6_K(const uint8_t* const* w, int64_t nsb, const float* x,
              size_t ahead, float* out) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  alignas(64) int8_t q[R][256];
  alignas(64) float s[R][16];
  for (int64_t sb = 0; sb < nsb; ++sb) {
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w[r] + 210 * sb;
      for (int l = 0; l < 210; l += 64) Prefetch(blk + ahead + l);
      UnpackQ6_K(blk, q[r], s[r]);
    }
    const float* xs = x + 256 * sb;
#pragma GCC unroll 2
    for (int v = 0; v < 16; ++v) {
      const __m512 xv = _mm512_loadu_ps(xs + 16 * v);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        // As DequantizeRow: (d sc) q, then the dot product.
        const __m512 wv = _mm512_mul_ps(_mm512_cvtepi32_ps(I8x16(q[r] + 16 * v)),
                                        _mm512_set1_ps(s[r][v]));
        acc[r][v & 1] = _mm512_fmadd_ps(wv, xv, acc[r][v & 1]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
  }
}

void DecodeQ6_K(const uint8_t* w, int64_t sb, float* out) {
  alignas(64) int8_t q[256];
  alignas(64) float s[16];
  UnpackQ6_K(w + 210 * sb, q, s);
  for (int v = 0; v < 16; ++v) {
    _mm512_store_ps(out + 16 * v, _mm512_mul_ps(_mm512_cvtepi32_ps(I8x16(q + 16 * v)),
                                                 _mm512_set1_ps(s[v])));
  }
}

// ---- F16 -------------------------------------------------------------------

inline __m512 F16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

template <int R>
void GemvF16(const uint8_t* const* w, int64_t k, const float* x, size_t ahead,
             float* out) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const uint16_t* h[R];
  for (int r = 0; r < R; ++r) h[r] = reinterpret_cast<const uint16_t*>(w[r]);
  int64_t p = 0;
  for (; p + 32 <= k; p += 32) {
    const __m512 x0 = _mm512_loadu_ps(x + p), x1 = _mm512_loadu_ps(x + p + 16);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      Prefetch(reinterpret_cast<const uint8_t*>(h[r] + p) + ahead);
      acc[r][0] = _mm512_fmadd_ps(F16x16(h[r] + p), x0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(F16x16(h[r] + p + 16), x1, acc[r][1]);
    }
  }
  if (p < k) {
    // Masked tail (< 32 values): two masked 16-lane steps.
    for (int64_t q = p; q < k; q += 16) {
      const int rest = k - q < 16 ? static_cast<int>(k - q) : 16;
      const __mmask16 mask = static_cast<__mmask16>((1u << rest) - 1);
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + q);
      for (int r = 0; r < R; ++r) {
        const __m256i hv = _mm256_maskz_loadu_epi16(mask, h[r] + q);
        acc[r][0] = _mm512_fmadd_ps(_mm512_cvtph_ps(hv), xv, acc[r][0]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
  }
}

// ---- Dispatch ----------------------------------------------------------------

// Each pass prefetches the rows of the next one (`ahead` bytes on): the
// hardware prefetchers stop at page boundaries, which rows of a few KB
// cross often.
// xt: x in nibble order (XNibbleOrder) for the 4-bit formats.
template <int R>
void Gemv(const QuantGemmArgs& g, const float* xt, const uint8_t* const* w,
          float* out) {
  const size_t ahead = R * g.row_bytes;
  switch (g.dtype) {
    case DType::kQ8_0: GemvQ8_0<R>(w, g.k / 32, g.x, ahead, out); break;
    case DType::kQ4_0: GemvQ4<R, true>(w, g.k / 32, g.x, ahead, out); break;
    case DType::kQ4_1: GemvQ4<R, false>(w, g.k / 32, xt, ahead, out); break;
    case DType::kQ4_K: GemvQ4_K<R>(w, g.k / 256, xt, ahead, out); break;
    case DType::kQ6_K: GemvQ6_K<R>(w, g.k / 256, g.x, ahead, out); break;
    default: GemvF16<R>(w, g.k, g.x, ahead, out); break;
  }
}

template <int R>
int64_t GemvRowsOf(const QuantGemmArgs& g, const float* xt, int64_t n,
                   int64_t n_end) {
  for (; n + R <= n_end; n += R) {
    const uint8_t* w[R];
    for (int r = 0; r < R; ++r) w[r] = g.w + (n + r) * g.row_bytes;
    float out[R];
    Gemv<R>(g, xt, w, out);
    for (int r = 0; r < R; ++r) {
      g.y[n + r] = out[r] + (g.bias != nullptr ? g.bias[n + r] : 0.0f);
    }
  }
  return n;
}

void GemvRows(const QuantGemmArgs& g, int64_t n_begin, int64_t n_end) {
  const bool nibbles = g.dtype == DType::kQ4_1 || g.dtype == DType::kQ4_K;
  const float* xt = nibbles ? XNibbleOrder(g.x, g.k) : nullptr;
  int64_t n = GemvRowsOf<kGemvRows>(g, xt, n_begin, n_end);
  n = GemvRowsOf<2>(g, xt, n, n_end);
  GemvRowsOf<1>(g, xt, n, n_end);
}

// Values [k0, k0 + kc) of weight row w as F32 (k0, kc multiples of the
// block; kc <= kPanelK).
void DecodeChunk(DType dtype, const uint8_t* w, int64_t k0, int64_t kc,
                 float* out) {
  switch (dtype) {
    case DType::kQ8_0: DecodeQ8_0(w, k0 / 32, kc / 32, out); break;
    case DType::kQ4_0: DecodeQ4<true>(w, k0 / 32, kc / 32, out); break;
    case DType::kQ4_1: DecodeQ4<false>(w, k0 / 32, kc / 32, out); break;
    case DType::kQ4_K: DecodeQ4_K(w, k0 / 256, out); break;
    case DType::kQ6_K: DecodeQ6_K(w, k0 / 256, out); break;
    case DType::kQ5_0: DecodeQ5<false>(w, k0 / 32, kc / 32, out); break;
    case DType::kQ5_1: DecodeQ5<true>(w, k0 / 32, kc / 32, out); break;
    default: {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(w) + k0;
      int64_t p = 0;
      for (; p + 16 <= kc; p += 16) _mm512_store_ps(out + p, F16x16(h + p));
      for (; p < kc; ++p) out[p] = _cvtsh_ss(h[p]);
      break;
    }
  }
}

// acc[i][r] (in memory, 16 lanes each) += x row i . panel row r over kc
// values (a multiple of 16), i < MR.
template <int MR>
void PanelTile(const float* x, int64_t ldx, const float* panel, int64_t kc,
               float* acc) {
  __m512 a[MR][kPanelRows];
  for (int i = 0; i < MR; ++i) {
    for (int r = 0; r < kPanelRows; ++r) a[i][r] = _mm512_load_ps(acc + 16 * (kPanelRows * i + r));
  }
  for (int64_t p = 0; p < kc; p += 16) {
    __m512 wv[kPanelRows];
    for (int r = 0; r < kPanelRows; ++r) wv[r] = _mm512_load_ps(panel + kPanelK * r + p);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_loadu_ps(x + i * ldx + p);
      for (int r = 0; r < kPanelRows; ++r) a[i][r] = _mm512_fmadd_ps(wv[r], xv, a[i][r]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int r = 0; r < kPanelRows; ++r) _mm512_store_ps(acc + 16 * (kPanelRows * i + r), a[i][r]);
  }
}

// M >= 2: weight rows [n_begin, n_end) in groups of kPanelRows, each chunk
// of kPanelK values decoded once for all M activation rows.
void PanelRows(const QuantGemmArgs& g, int64_t n_begin, int64_t n_end) {
  alignas(64) float panel[kPanelRows * kPanelK];
  struct alignas(64) Vec {
    float v[16];
  };
  static thread_local std::vector<Vec> acc_buf;
  const size_t acc_vecs = static_cast<size_t>(g.m) * kPanelRows;
  if (acc_buf.size() < acc_vecs) acc_buf.resize(acc_vecs);
  float* acc = acc_buf.data()->v;
  // F16 rows need not be a multiple of 16 values: the panel is zero-padded
  // to 16 and x read with a masked tail below.
  const int64_t k16 = g.k / 16 * 16;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kPanelRows) {
    const int rows = n_end - n0 < kPanelRows ? static_cast<int>(n_end - n0) : kPanelRows;
    std::memset(acc, 0, acc_vecs * sizeof(Vec));
    for (int64_t k0 = 0; k0 < k16; k0 += kPanelK) {
      const int64_t kc = k16 - k0 < kPanelK ? k16 - k0 : kPanelK;
      for (int r = 0; r < kPanelRows; ++r) {
        if (r < rows) {
          DecodeChunk(g.dtype, g.w + (n0 + r) * g.row_bytes, k0, kc, panel + kPanelK * r);
        } else {
          std::memset(panel + kPanelK * r, 0, kc * sizeof(float));
        }
      }
      const float* x = g.x + k0;
      int64_t i = 0;
      for (; i + kTileM <= g.m; i += kTileM) {
        PanelTile<kTileM>(x + i * g.ldx, g.ldx, panel, kc, acc + 16 * kPanelRows * i);
      }
      switch (g.m - i) {
        case 1: PanelTile<1>(x + i * g.ldx, g.ldx, panel, kc, acc + 16 * kPanelRows * i); break;
        case 2: PanelTile<2>(x + i * g.ldx, g.ldx, panel, kc, acc + 16 * kPanelRows * i); break;
        case 3: PanelTile<3>(x + i * g.ldx, g.ldx, panel, kc, acc + 16 * kPanelRows * i); break;
        default: break;
      }
    }
    for (int64_t i = 0; i < g.m; ++i) {
      for (int r = 0; r < rows; ++r) {
        float sum = _mm512_reduce_add_ps(_mm512_load_ps(acc + 16 * (kPanelRows * i + r)));
        if (k16 < g.k) {  // F16 tail
          const uint16_t* h = reinterpret_cast<const uint16_t*>(g.w + (n0 + r) * g.row_bytes);
          for (int64_t p = k16; p < g.k; ++p) sum += _cvtsh_ss(h[p]) * g.x[i * g.ldx + p];
        }
        g.y[i * g.ldy + n0 + r] = sum + (g.bias != nullptr ? g.bias[n0 + r] : 0.0f);
      }
    }
  }
}

// Values decoded per DecodeChunk call on the prefill path (one K-quant
// super-block).
constexpr int64_t kPackPiece = 256;

// ---- Prefill with int8 dot products (AVX512_VNNI) --------------------------
// Q8_0, Q4_0, Q4_1 and Q4_K values are w = d u + o with u an unsigned byte
// per value and d, o per block of 32 (Q8_0: u = q + 128, o = -128 d; Q4_0:
// u = the nibble, o = -8 d; Q4_1: u = the nibble, o = m; Q4_K: per
// sub-block, u = the nibble, d = d sc, o = -dmin m), and Q6_K's per block
// of 16 (u = q, d = d sc, o = -32 d sc). Activations are quantized per
// block of 32 to int8, xq = round(x / dx) with dx = max|x| / 127, so that
//   sum_k x_k w_k ~= sum_b dx_b (d_b sum_k xq_k u_k + o_b sum_k xq_k),
// the integer sums by vpdpbusd (u8 x s8, four products per 32-bit lane).
// The error is that of the activation rounding: |x - dx xq| <= dx / 2.

// Activation rows per register tile (6 x 2 int32 sums + 6 x 2 F32
// accumulators + panel vectors fit the 32 registers) and weight rows per
// panel (two 16-lane vectors).
constexpr int kVnniMr = 6;
constexpr int kVnniNr = 32;
// A weight block is G groups of 4 values: G = 8 (32 values) for all but
// Q6_K, whose scales cover 16 values (G = 4). A packed block is u[g][j][4]
// for its groups g and the kVnniNr rows j: 4 G kVnniNr bytes.

// Values per weight block of the int8 path.
inline int VnniBlockValues(DType dtype) { return dtype == DType::kQ6_K ? 16 : 32; }

struct VnniX {
  const int8_t* q;   // [m][k] quantized activations
  const float* dx;   // [m][k / 32] scales of the 32-value blocks of x
  // [m][nbw] dx * sum of xq over each weight block, for the formats
  // without xoff (null for the others).
  const float* dxs;
  // [m][nbw] c * sum of xq over each weight block, for the formats whose
  // offset is o = c d (VnniOffsetFactor); null for the others.
  const int32_t* xoff;
  int64_t nbw;       // weight blocks per row
};

// c of the formats whose weight offset is a fixed multiple of the scale, o
// = c d (Q8_0 -128, Q4_0 -8, Q5_0 -16, Q6_K -32): their offset term d dx c
// sum(xq) joins the block's integer sum (which starts at c sum(xq)) and
// needs no F32 operations of its own. 0 for Q4_1, Q5_1 and Q4_K
// (independent minima).
inline int32_t VnniOffsetFactor(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0: return -128;
    case DType::kQ4_0: return -8;
    case DType::kQ5_0: return -16;
    case DType::kQ6_K: return -32;
    default: return 0;
  }
}

// Panel of weight rows [n0, n0 + rows) (rows <= kVnniNr; the others zero)
// over nb weight blocks: u bytes (4 G kVnniNr per block), d and o
// (kVnniNr floats per block).
void PackVnniPanel(const QuantGemmArgs& g, int64_t n0, int rows, int64_t nb,
                   uint8_t* pu, float* pd, float* po) {
  const int groups = VnniBlockValues(g.dtype) / 4;
  const int64_t block_bytes = 4 * groups * kVnniNr;
  const size_t bytes = DTypeBlockBytes(g.dtype);
  const bool q5 = g.dtype == DType::kQ5_0 || g.dtype == DType::kQ5_1;
  const __m128i low = _mm_set1_epi8(0x0F);
  const bool k_quants = g.dtype == DType::kQ6_K || g.dtype == DType::kQ4_K;
  for (int j = 0; j < kVnniNr; ++j) {
    if (j >= rows) {
      for (int64_t b = 0; b < nb; ++b) {
        // (The 32-value formats' u bytes, zeros included, come from the
        // transposed stores below.)
        for (int q = 0; k_quants && q < groups; ++q) std::memset(pu + b * block_bytes + q * 4 * kVnniNr + 4 * j, 0, 4);
        pd[b * kVnniNr + j] = 0.0f;
        po[b * kVnniNr + j] = 0.0f;
      }
      continue;
    }
    const uint8_t* row = g.w + (n0 + j) * g.row_bytes;
    if (g.dtype == DType::kQ6_K) {
      // Block of 16 values v: u = q (0..63), d = d sc_v, o = -32 d sc_v.
      for (int64_t sb = 0; sb < nb / 16; ++sb) {
        alignas(64) int8_t q[256];
        alignas(64) float sc[16];
        UnpackQ6_K(row + sb * 210, q, sc);
        for (int v = 0; v < 16; ++v) {
          alignas(16) uint8_t u[16];
          _mm_store_si128(reinterpret_cast<__m128i*>(u),
                          _mm_add_epi8(_mm_load_si128(reinterpret_cast<const __m128i*>(q + 16 * v)),
                                       _mm_set1_epi8(32)));
          const int64_t b = sb * 16 + v;
          uint8_t* dst = pu + b * block_bytes + 4 * j;
          for (int gq = 0; gq < 4; ++gq) std::memcpy(dst + gq * 4 * kVnniNr, u + 4 * gq, 4);
          pd[b * kVnniNr + j] = sc[v];
          po[b * kVnniNr + j] = -32.0f * sc[v];
        }
      }
      continue;
    }
    if (g.dtype == DType::kQ4_K) {
      // Sub-block s of 32: u = its nibbles (low ones of the pair's 32 bytes
      // for even s, high for odd), d = d sc_s, o = -dmin m_s.
      for (int64_t sb = 0; sb < nb / 8; ++sb) {
        const uint8_t* blk = row + sb * 144;
        alignas(64) float sm[16];
        ScalesQ4_K(blk, sm);
        for (int sub = 0; sub < 8; ++sub) {
          const __m256i v = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(blk + 16 + 32 * (sub / 2)));
          const __m256i nib = _mm256_and_si256(
              sub % 2 == 0 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
          alignas(32) uint8_t u[32];
          _mm256_store_si256(reinterpret_cast<__m256i*>(u), nib);
          const int64_t b = sb * 8 + sub;
          uint8_t* dst = pu + b * block_bytes + 4 * j;
          for (int q = 0; q < 8; ++q) std::memcpy(dst + q * 4 * kVnniNr, u + 4 * q, 4);
          pd[b * kVnniNr + j] = sm[sub];
          po[b * kVnniNr + j] = -sm[8 + sub];
        }
      }
      continue;
    }
  }
  if (k_quants) return;
  // Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: 16 rows x 2 blocks at a time, each row's two blocks
  // of u bytes as 16 dwords of one vector; a 16 x 16 dword transpose turns
  // them into the packed layout's groups (64 bytes: 16 rows' 4 bytes of
  // one group), one store each.
  for (int j0 = 0; j0 < kVnniNr; j0 += 16) {
    for (int64_t b = 0; b < nb; b += 2) {
      const bool pair = b + 1 < nb;
      __m512 r[16];
      for (int i = 0; i < 16; ++i) {
        const int j = j0 + i;
        if (j >= rows) {
          r[i] = _mm512_setzero_ps();
          continue;
        }
        const uint8_t* row = g.w + (n0 + j) * g.row_bytes;
        __m256i u[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int h = 0; h < (pair ? 2 : 1); ++h) {
          const uint8_t* blk = row + (b + h) * bytes;
          const float d = HalfAt(blk);
          float o;
          if (g.dtype == DType::kQ8_0) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
            u[h] = _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80)));
            o = -128.0f * d;
          } else {
            // Q4_0 / Q4_1 / Q5_0 / Q5_1: the nibbles after d (and m, and
            // Q5's 32 high bits, which become bit 4 of value j's byte).
            const bool with_min = g.dtype == DType::kQ4_1 || g.dtype == DType::kQ5_1;
            const uint8_t* qs = blk + 2 + (with_min ? 2 : 0) + (q5 ? 4 : 0);
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
            u[h] = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low),
                                    _mm_and_si128(v, low));
            if (q5) {
              uint32_t qh;
              std::memcpy(&qh, qs - 4, 4);
              u[h] = _mm256_or_si256(u[h], _mm256_maskz_mov_epi8(qh, _mm256_set1_epi8(0x10)));
            }
            o = with_min ? HalfAt(blk + 2) : (q5 ? -16.0f : -8.0f) * d;
          }
          pd[(b + h) * kVnniNr + j] = d;
          po[(b + h) * kVnniNr + j] = o;
        }
        r[i] = _mm512_castsi512_ps(
            _mm512_inserti64x4(_mm512_castsi256_si512(u[0]), u[1], 1));
      }
      Transpose16x16(r);
      for (int c = 0; c < (pair ? 16 : 8); ++c) {
        uint8_t* dst = pu + (b + c / 8) * block_bytes + (c % 8) * 4 * kVnniNr + 4 * j0;
        _mm512_store_si512(dst, _mm512_castps_si512(r[c]));
      }
    }
  }
}

// y rows [i0, i0 + MR), columns [n0, n0 + nvalid) = x . panel (+ bias).
// kIntOffset: x.xoff holds the offset terms (VnniOffsetFactor); per block
// and row the epilogue is then 2 conversions, 2 scale products and 2 FMAs
// (else 2 more FMAs for the offsets), against 2 G dot products.
template <int MR, int G, bool kIntOffset>
__attribute__((target("avx512vnni"))) void MicroVnni(
    const VnniX& x, int64_t k, int64_t i0, const uint8_t* pu, const float* pd,
    const float* po, float* y, int64_t ldy, int nvalid, const float* bias) {
  __m512 f[MR][2];
  for (int i = 0; i < MR; ++i) f[i][0] = f[i][1] = _mm512_setzero_ps();
  const int8_t* xq = x.q + i0 * k;
  constexpr int kValues = 4 * G;
  const int64_t nbx = k / 32;
  const float* dx = x.dx + i0 * nbx;
  const float* dxs = kIntOffset ? nullptr : x.dxs + i0 * x.nbw;
  const int32_t* xoff = kIntOffset ? x.xoff + i0 * x.nbw : nullptr;
  for (int64_t b = 0; b < x.nbw; ++b) {
    __m512i s[MR][2];
    for (int i = 0; i < MR; ++i) {
      if constexpr (kIntOffset) {
        s[i][0] = s[i][1] = _mm512_set1_epi32(xoff[i * x.nbw + b]);
      } else {
        s[i][0] = s[i][1] = _mm512_setzero_si512();
      }
    }
    const uint8_t* ub = pu + b * (4 * G * kVnniNr);
#pragma GCC unroll 8
    for (int q = 0; q < G; ++q) {
      const __m512i w0 = _mm512_load_si512(ub + q * 4 * kVnniNr);
      const __m512i w1 = _mm512_load_si512(ub + q * 4 * kVnniNr + 64);
#pragma GCC unroll 6
      for (int i = 0; i < MR; ++i) {
        int32_t a;
        std::memcpy(&a, xq + i * k + kValues * b + 4 * q, 4);
        const __m512i av = _mm512_set1_epi32(a);
        s[i][0] = _mm512_dpbusd_epi32(s[i][0], w0, av);
        s[i][1] = _mm512_dpbusd_epi32(s[i][1], w1, av);
      }
    }
    const __m512 d0 = _mm512_load_ps(pd + b * kVnniNr), d1 = _mm512_load_ps(pd + b * kVnniNr + 16);
#pragma GCC unroll 6
    for (int i = 0; i < MR; ++i) {
      const __m512 sx = _mm512_set1_ps(dx[i * nbx + kValues * b / 32]);
      f[i][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i][0]), _mm512_mul_ps(d0, sx), f[i][0]);
      f[i][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i][1]), _mm512_mul_ps(d1, sx), f[i][1]);
    }
    if constexpr (!kIntOffset) {
      const __m512 o0 = _mm512_load_ps(po + b * kVnniNr), o1 = _mm512_load_ps(po + b * kVnniNr + 16);
#pragma GCC unroll 6
      for (int i = 0; i < MR; ++i) {
        const __m512 ss = _mm512_set1_ps(dxs[i * x.nbw + b]);
        f[i][0] = _mm512_fmadd_ps(o0, ss, f[i][0]);
        f[i][1] = _mm512_fmadd_ps(o1, ss, f[i][1]);
      }
    }
  }
  const __mmask16 m0 = nvalid >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << nvalid) - 1);
  const __mmask16 m1 = nvalid >= 32 ? 0xFFFF
                       : nvalid <= 16 ? 0
                                      : static_cast<__mmask16>((1u << (nvalid - 16)) - 1);
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
  if (bias != nullptr) {
    b0 = _mm512_maskz_loadu_ps(m0, bias);
    b1 = _mm512_maskz_loadu_ps(m1, bias + 16);
  }
  for (int i = 0; i < MR; ++i) {
    float* yr = y + (i0 + i) * ldy;
    _mm512_mask_storeu_ps(yr, m0, _mm512_add_ps(f[i][0], b0));
    _mm512_mask_storeu_ps(yr + 16, m1, _mm512_add_ps(f[i][1], b1));
  }
}

// All activation rows against one packed panel.
template <int G, bool kIntOffset>
void MicroVnniRows(const VnniX& x, const QuantGemmArgs& g, const uint8_t* pu,
                   const float* pd, const float* po, float* y, int rows,
                   const float* bias) {
  int64_t i = 0;
  for (; i + kVnniMr <= g.m; i += kVnniMr) {
    MicroVnni<kVnniMr, G, kIntOffset>(x, g.k, i, pu, pd, po, y, g.ldy, rows, bias);
  }
  switch (g.m - i) {
    case 1: MicroVnni<1, G, kIntOffset>(x, g.k, i, pu, pd, po, y, g.ldy, rows, bias); break;
    case 2: MicroVnni<2, G, kIntOffset>(x, g.k, i, pu, pd, po, y, g.ldy, rows, bias); break;
    case 3: MicroVnni<3, G, kIntOffset>(x, g.k, i, pu, pd, po, y, g.ldy, rows, bias); break;
    case 4: MicroVnni<4, G, kIntOffset>(x, g.k, i, pu, pd, po, y, g.ldy, rows, bias); break;
    case 5: MicroVnni<5, G, kIntOffset>(x, g.k, i, pu, pd, po, y, g.ldy, rows, bias); break;
    default: break;
  }
}

struct VnniTask {
  const QuantGemmArgs* g;
  VnniX x;
};

// Bytes of one packed panel: u (k bytes per row), then d and o (a float
// per row and weight block each), rounded up to 64.
inline int64_t VnniPanelBytes(DType dtype, int64_t k) {
  const int64_t nb = k / VnniBlockValues(dtype);
  return (k * kVnniNr + 2 * nb * kVnniNr * static_cast<int64_t>(sizeof(float)) + 63) / 64 * 64;
}

// Panels [begin, end) of kVnniNr weight rows, all activation rows each.
void VnniPanelsTask(void* arg, int64_t begin, int64_t end) {
  const VnniTask& t = *static_cast<const VnniTask*>(arg);
  const QuantGemmArgs& g = *t.g;
  const int64_t nb = t.x.nbw;
  const int64_t panel_bytes = VnniPanelBytes(g.dtype, g.k);
  uint8_t* scratch = nullptr;
  if (g.packed == nullptr) {
    static thread_local std::vector<uint8_t> buf;
    if (buf.size() < static_cast<size_t>(panel_bytes + 64)) buf.resize(panel_bytes + 64);
    scratch = reinterpret_cast<uint8_t*>(
        (reinterpret_cast<uintptr_t>(buf.data()) + 63) / 64 * 64);
  }
  for (int64_t p = begin; p < end; ++p) {
    const int64_t n0 = p * kVnniNr;
    const int rows = g.n - n0 < kVnniNr ? static_cast<int>(g.n - n0) : kVnniNr;
    // Panels packed at load are read in place (PackVnniWeights).
    const uint8_t* pu = g.packed != nullptr ? g.packed + p * panel_bytes : scratch;
    const float* pd = reinterpret_cast<const float*>(pu + g.k * kVnniNr);
    const float* po = pd + nb * kVnniNr;
    if (g.packed == nullptr) {
      PackVnniPanel(g, n0, rows, nb, scratch, const_cast<float*>(pd), const_cast<float*>(po));
    }
    float* y = g.y + n0;
    const float* bias = g.bias != nullptr ? g.bias + n0 : nullptr;
    if (g.dtype == DType::kQ6_K) {
      MicroVnniRows<4, true>(t.x, g, pu, pd, po, y, rows, bias);
    } else if (t.x.xoff != nullptr) {
      MicroVnniRows<8, true>(t.x, g, pu, pd, po, y, rows, bias);
    } else {
      MicroVnniRows<8, false>(t.x, g, pu, pd, po, y, rows, bias);
    }
  }
}

// 1 / step of an activation block's quantization; 0 for a step below the
// smallest normal float, whose inverse could overflow (such a block, max
// |x| below ~4e-34, becomes zeros).
inline float InverseStep(float step) {
  return step >= std::numeric_limits<float>::min() ? 1.0f / step : 0.0f;
}

struct QuantizeXTask {
  const QuantGemmArgs* g;
  int8_t* q;
  float* dx;
  float* dxs;  // per weight block (32 or 16 values), when xoff is null
  int32_t* xoff;  // c sum(xq) per weight block, or null (VnniX::xoff)
  int32_t c;      // VnniOffsetFactor
  bool halves; // 16-value weight blocks
  // x quantized per super-block of 256 (the K-quants under the int8
  // activation policy, as ggml's q8_K) instead of per block of 32.
  bool superblocks = false;
  // Blocks of 32 as llama.cpp quantizes activations (QuantizeXInt8): the
  // inverse step 127 / max |x|, the steps (dx, dxs) rounded to F16.
  bool f16_steps = false;
};

inline __m512 RoundToF16(__m512 v) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// One row of x quantized per block of 32 as QuantizeXRows documents, 16
// blocks at a time (32-value weight blocks only).
inline void QuantizeRowBlocks(const float* xr, int64_t nb, int8_t* q, float* dx,
                              float* dxs, int32_t* xoff, int32_t c, bool f16_steps) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 tiny = _mm512_set1_ps(std::numeric_limits<float>::min());
  for (int64_t b0 = 0; b0 < nb; b0 += 16) {
    const int nt = static_cast<int>(nb - b0 < 16 ? nb - b0 : 16);
    const __mmask16 tail = static_cast<__mmask16>(nt == 16 ? 0xFFFF : (1u << nt) - 1);
    __m512 v[16];
    for (int t = 0; t < 16; ++t) {
      if (t < nt) {
        const float* p = xr + 32 * (b0 + t);
        v[t] = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(p)),
                             _mm512_andnot_ps(sign, _mm512_loadu_ps(p + 16)));
      } else {
        v[t] = _mm512_setzero_ps();
      }
    }
    const __m512 amax =
        ReduceLanes16(v, [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); });
    // Same F32 operations as the scalar form: d = amax / 127, 1 / d (0
    // below the smallest normal float, see InverseStep).
    const __m512 d = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
    const __mmask16 normal = _mm512_cmp_ps_mask(d, tiny, _CMP_GE_OQ);
    const __m512 id = f16_steps ? _mm512_maskz_div_ps(normal, _mm512_set1_ps(127.0f), amax)
                                : _mm512_maskz_div_ps(normal, _mm512_set1_ps(1.0f), d);
    _mm512_mask_storeu_ps(dx + b0, tail, f16_steps ? RoundToF16(d) : d);
    alignas(64) float ids[16];
    _mm512_store_ps(ids, id);
    for (int t = 0; t < nt; ++t) {
      const float* p = xr + 32 * (b0 + t);
      const __m512 it = _mm512_set1_ps(ids[t]);
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(p), it));
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(p + 16), it));
      int8_t* qb = q + 32 * (b0 + t);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb), _mm512_cvtepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16), _mm512_cvtepi32_epi8(q1));
      v[t] = _mm512_castsi512_ps(_mm512_add_epi32(q0, q1));
    }
    const __m512i sums = _mm512_castps_si512(ReduceLanes16(v, [](__m512 a, __m512 b) {
      return _mm512_castsi512_ps(
          _mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
    }));
    if (xoff != nullptr) {
      _mm512_mask_storeu_epi32(xoff + b0, tail, _mm512_mullo_epi32(sums, _mm512_set1_epi32(c)));
    } else {
      const __m512 ds = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sums));
      _mm512_mask_storeu_ps(dxs + b0, tail, f16_steps ? RoundToF16(ds) : ds);
    }
  }
}

// Rows [begin, end) of x quantized per block of 32, or per super-block of
// 256 (t.superblocks), round to nearest even.
void QuantizeXRows(void* arg, int64_t begin, int64_t end) {
  const QuantizeXTask& t = *static_cast<const QuantizeXTask*>(arg);
  const QuantGemmArgs& g = *t.g;
  const int64_t nb = g.k / 32;
  const __m512 sign = _mm512_set1_ps(-0.0f);
  if (!t.halves && !t.superblocks) {
    for (int64_t i = begin; i < end; ++i) {
      QuantizeRowBlocks(g.x + i * g.ldx, nb, t.q + i * g.k, t.dx + i * nb,
                        t.dxs != nullptr ? t.dxs + i * nb : nullptr,
                        t.xoff != nullptr ? t.xoff + i * nb : nullptr, t.c, t.f16_steps);
    }
    return;
  }
  // Block by block: Q6_K's 16-value weight blocks, or a scale per 256 values
  // (stored for each of its blocks of 32, as the GEMM reads dx per block).
  for (int64_t i = begin; i < end; ++i) {
    const float* xr = g.x + i * g.ldx;
    float d = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      if (!t.superblocks || b % 8 == 0) {
        const int64_t span = t.superblocks ? 256 : 32;
        __m512 mx = _mm512_setzero_ps();
        for (int j = 0; j < span; j += 16) {
          mx = _mm512_max_ps(mx, _mm512_andnot_ps(sign, _mm512_loadu_ps(xr + 32 * b + j)));
        }
        d = _mm512_reduce_max_ps(mx) / 127.0f;
      }
      const __m512 id = _mm512_set1_ps(InverseStep(d));
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xr + 32 * b), id));
      const __m512i q1 =
          _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xr + 32 * b + 16), id));
      int8_t* qb = t.q + i * g.k + 32 * b;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb), _mm512_cvtepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16), _mm512_cvtepi32_epi8(q1));
      t.dx[i * nb + b] = d;
      const int32_t s0 = _mm512_reduce_add_epi32(q0), s1 = _mm512_reduce_add_epi32(q1);
      if (t.halves) {
        // 16-value weight blocks (Q6_K): a sum per half block.
        t.xoff[i * 2 * nb + 2 * b] = t.c * s0;
        t.xoff[i * 2 * nb + 2 * b + 1] = t.c * s1;
      } else if (t.xoff != nullptr) {
        t.xoff[i * nb + b] = t.c * (s0 + s1);
      } else {
        t.dxs[i * nb + b] = d * static_cast<float>(s0 + s1);
      }
    }
  }
}

// ---- Decode GEMV with int8 dot products (AVX512_VNNI) ----------------------
// M = 1 for Q4_0, Q4_1 and Q8_0 (GemvVnniRows; Q4_K and Q6_K below). x is quantized once per call
// per block of 32 to 16-bit integers v = round(x / sx), sx = max|x| / 32512,
// kept as two int8 levels v = 256 h + l (h = floor((v + 128) / 256) in
// [-127, 127], l = v - 256 h in [-128, 127]): |x - sx v| <= sx / 2 =
// max|x| / 65024. The weight bytes u (Q4: the nibbles; Q8_0: q + 128, i.e.
// q ^ 0x80) come from the blocks as stored, and vpdpbusd (u8 x s8) sums
// u h and u l into int32 lanes, per block:
//   sum_k w_k x_k ~= sum_b d_b sx_b (256 sum u h + sum u l) + c_b S_b,
// S_b = sx_b sum v (block b of x as the kernel sees it) and c_b = -8 d_b
// (Q4_0), m_b (Q4_1), -128 d_b (Q8_0): the offsets are exact for the
// quantized x, so the error is that of x alone plus F32 rounding.
// Bounds: a lane sums at most 8 products u (<= 255) x |h| (<= 128) per level
// and block, 261120; 256 of that plus the l sum stays below 2^27.
//
// A group of blocks (Q4: 4 blocks, 72 or 80 bytes; Q8_0: 2 blocks, 68
// bytes) is read with two 64-byte loads (at its start and 8 / 16 / 4 bytes
// on, so nothing past the group is touched); one two-source word permute
// (vpermt2w) lines the nibble / int8 bytes up in 128-bit (Q4) or 256-bit
// (Q8_0) lanes per block, and one vpermw spreads the f16 scales (and Q4_1
// minima) over the block's int32 lanes. The last, partial group of a row
// uses masked loads.
//
// Activation layout per group: Q4 (384 bytes): [h of values 0..15 of
// blocks 0..3 (4 x 16 bytes)][h of 16..31][l of 0..15][l of 16..31][sx: 16
// floats, sx_L at lanes 4L..4L+3][S: 16 floats, S_L at lane 4L, 0
// elsewhere], matching the nibble vector (lane L = block L, byte j = values
// j and j + 16); Q8_0 (256 bytes): [h of both blocks, in order][l][sx at
// lanes 8L..8L+7][S at lane 8L].

constexpr int64_t kQ4Group = 4, kQ4GroupBytes = 384;
constexpr int64_t kQ8Group = 2, kQ8GroupBytes = 256;

// vpermt2w / vpermw index tables (16-bit words).
struct WordIndex {
  int16_t v[32];
};

// Output word o = word i of block L's quants (L = o / per_block): word
// stride * L + first + i of the group, from the first load (words 0..31)
// or else from the second (word 32 + w - second_at).
constexpr WordIndex QuantWords(int stride, int first, int per_block,
                               int second_at) {
  WordIndex t{};
  for (int o = 0; o < 32; ++o) {
    const int w = stride * (o / per_block) + first + o % per_block;
    t.v[o] = static_cast<int16_t>(w < 32 ? w : 32 + w - second_at);
  }
  return t;
}

// Output words 0..15: the scale of block o / lanes_per_block (word stride
// L); words 16..31: word stride L + 1 (Q4_1's minimum).
constexpr WordIndex ScaleWords(int stride, int halves_per_block) {
  WordIndex t{};
  for (int o = 0; o < 32; ++o) {
    const int block = (o % 16) / halves_per_block;
    t.v[o] = static_cast<int16_t>(stride * block + (o >= 16 ? 1 : 0));
  }
  return t;
}

constexpr WordIndex kQ4_0Quants = QuantWords(9, 1, 8, 4);
constexpr WordIndex kQ4_1Quants = QuantWords(10, 2, 8, 8);
// Q5_0: 22-byte blocks (11 words, nibbles from word 3), a group of 88
// bytes, the second load at byte 24; Q5_1: 24-byte blocks (12 words, from
// word 4), 96 bytes, the second load at 32.
constexpr WordIndex kQ5_0Quants = QuantWords(11, 3, 8, 12);
constexpr WordIndex kQ5_1Quants = QuantWords(12, 4, 8, 16);
constexpr WordIndex kQ8_0Quants = QuantWords(17, 1, 16, 2);
constexpr WordIndex kQ4_0Scales = ScaleWords(9, 4);
constexpr WordIndex kQ4_1Scales = ScaleWords(10, 4);
// Q5's later blocks' scales lie past the first load: taken from the second
// (vpermt2w), as QuantWords does.
constexpr WordIndex ScaleWords2(int stride, int second_at) {
  WordIndex t{};
  for (int o = 0; o < 32; ++o) {
    const int w = stride * ((o % 16) / 4) + (o >= 16 ? 1 : 0);
    t.v[o] = static_cast<int16_t>(w < 32 ? w : 32 + w - second_at);
  }
  return t;
}
constexpr WordIndex kQ5_0Scales = ScaleWords2(11, 12);
constexpr WordIndex kQ5_1Scales = ScaleWords2(12, 16);
constexpr WordIndex kQ8_0Scales = ScaleWords(17, 8);

inline __m512i LoadIndex(const WordIndex& t) { return _mm512_loadu_si512(t.v); }

inline __mmask64 FirstBytes(int64_t n) {
  // n <= 0: a partial group that ends before the second load starts (Q5).
  return n >= 64 ? ~__mmask64{0} : n <= 0 ? __mmask64{0} : (__mmask64{1} << n) - 1;
}

// The two 64-byte loads of one row's group of blocks (kBytes each, up to
// kGroup of them): at the group's start and kSecond bytes on; whole loads
// for a full group, masked to the group's bytes for a row's last, partial
// one.
template <int64_t kBytes, int64_t kSecond, int64_t kGroup>
struct GroupLoads {
  explicit GroupLoads(int64_t blocks)
      : full(blocks == kGroup),
        first(FirstBytes(kBytes * blocks)),
        second(FirstBytes(kBytes * blocks - kSecond)) {}

  // v0, v1 = the group at base; prefetches base + ahead (two lines).
  void Load(const uint8_t* base, size_t ahead, __m512i* v0, __m512i* v1) const {
    Prefetch(base + ahead);
    Prefetch(base + ahead + 64);
    if (full) {
      *v0 = _mm512_loadu_si512(base);
      *v1 = _mm512_loadu_si512(base + kSecond);
    } else {
      *v0 = _mm512_maskz_loadu_epi8(first, base);
      *v1 = _mm512_maskz_loadu_epi8(second, base + kSecond);
    }
  }

  bool full;
  __mmask64 first, second;
};

// A group's level sums into a row's accumulators, per int32 lane:
// acc += d sx (256 sh + sl) and off += c S; with one level (int8 x, kOne)
// acc += d sx sh.
template <bool kOne>
inline void AccumulateLevels(__m512i sh, __m512i sl, __m512 d, __m512 sx,
                             __m512 c, __m512 s, __m512* acc, __m512* off) {
  const __m512i t = kOne ? sh : _mm512_add_epi32(_mm512_slli_epi32(sh, 8), sl);
  *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(d, sx), *acc);
  *off = _mm512_fmadd_ps(c, s, *off);
}

// The sum of acc + offset x the sum of off (one fused multiply-add, so the
// result does not depend on how the compiler contracts it).
inline float ReduceRow(__m512 acc, __m512 off, float offset) {
  return std::fma(offset, _mm512_reduce_add_ps(off), _mm512_reduce_add_ps(acc));
}

// The 64-bit masks of a group's bit-4 values for the low-nibble vector
// (value j < 16 of block L at bit 16 L + j) and the high one (value j + 16):
// Q5's 32-bit qh words, each kBytes on from the last, at qh (blocks past
// `blocks` count as 0).
template <int64_t kBytes>
inline void HighBits(const uint8_t* qh, int64_t blocks, __mmask64* lo, __mmask64* hi) {
  uint64_t l = 0, h = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    uint32_t v;
    std::memcpy(&v, qh + kBytes * b, 4);
    l |= static_cast<uint64_t>(v & 0xFFFF) << (16 * b);
    h |= static_cast<uint64_t>(v >> 16) << (16 * b);
  }
  *lo = l;
  *hi = h;
}

// out[i R + r] = dot(row w[r], x row i) for R weight rows of nb Q4_0 /
// Q4_1 / Q5_0 / Q5_1 blocks and MX activation rows (xg[i]: row i's groups):
// each weight group is unpacked once for all MX rows. Every (r, i) pair
// runs the same operations in the same order whatever R and MX, so a row's
// output does not depend on the tile it ran in. Q5 adds bit 4 of each
// weight byte from the block's qh word.
template <int R, int MX, DType kFmt, bool kOne>
__attribute__((target("avx512vnni"))) void GemvVnniQ4(
    const uint8_t* const* w, int64_t nb, const uint8_t* const* xg, size_t ahead,
    float* out) {
  constexpr bool kQ5 = kFmt == DType::kQ5_0 || kFmt == DType::kQ5_1;
  constexpr bool kMin = kFmt == DType::kQ4_1 || kFmt == DType::kQ5_1;
  constexpr int64_t kBytes = kFmt == DType::kQ4_0 ? 18 : kFmt == DType::kQ4_1 ? 20
                             : kFmt == DType::kQ5_0 ? 22 : 24;
  // Byte offset of the 2nd load (the group's last 64 bytes).
  constexpr int64_t kSecond = 4 * kBytes - 64;
  constexpr int64_t kQh = kMin ? 4 : 2;  // Q5: the qh word's offset
  const __m512i quants = LoadIndex(kFmt == DType::kQ4_0   ? kQ4_0Quants
                                   : kFmt == DType::kQ4_1 ? kQ4_1Quants
                                   : kFmt == DType::kQ5_0 ? kQ5_0Quants
                                                          : kQ5_1Quants);
  const __m512i scales = LoadIndex(kFmt == DType::kQ4_0   ? kQ4_0Scales
                                   : kFmt == DType::kQ4_1 ? kQ4_1Scales
                                   : kFmt == DType::kQ5_0 ? kQ5_0Scales
                                                          : kQ5_1Scales);
  const __m512i low = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
  __m512 acc[R][MX], off[R][MX];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < MX; ++i) acc[r][i] = off[r][i] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; b += kQ4Group) {
    const int64_t xo = kQ4GroupBytes * (b / kQ4Group);
    const GroupLoads<kBytes, kSecond, kQ4Group> loads(nb - b < kQ4Group ? nb - b : kQ4Group);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      __m512i v0, v1;
      loads.Load(w[r] + kBytes * b, ahead, &v0, &v1);
      const __m512i q = _mm512_permutex2var_epi16(v0, quants, v1);
      __m512i lo = _mm512_and_si512(q, low);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
      if constexpr (kQ5) {
        __mmask64 m_lo, m_hi;
        HighBits<kBytes>(w[r] + kBytes * b + kQh, nb - b < kQ4Group ? nb - b : kQ4Group,
                         &m_lo, &m_hi);
        lo = _mm512_or_si512(lo, _mm512_maskz_mov_epi8(m_lo, bit4));
        hi = _mm512_or_si512(hi, _mm512_maskz_mov_epi8(m_hi, bit4));
      }
      const __m512i dm = kQ5 ? _mm512_permutex2var_epi16(v0, scales, v1)
                             : _mm512_permutexvar_epi16(scales, v0);
      const __m512 d = _mm512_cvtph_ps(_mm512_castsi512_si256(dm));
      const __m512 c = kMin ? _mm512_cvtph_ps(_mm512_extracti64x4_epi64(dm, 1)) : d;
#pragma GCC unroll 4
      for (int i = 0; i < MX; ++i) {
        const uint8_t* xa = xg[i] + xo;
        __m512i sh = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_load_si512(xa));
        sh = _mm512_dpbusd_epi32(sh, hi, _mm512_load_si512(xa + 64));
        __m512i sl = _mm512_setzero_si512();
        if constexpr (!kOne) {
          sl = _mm512_dpbusd_epi32(sl, lo, _mm512_load_si512(xa + 128));
          sl = _mm512_dpbusd_epi32(sl, hi, _mm512_load_si512(xa + 192));
        }
        AccumulateLevels<kOne>(sh, sl, d, _mm512_load_ps(xa + 256), c,
                               _mm512_load_ps(xa + 320), &acc[r][i], &off[r][i]);
      }
    }
  }
  for (int i = 0; i < MX; ++i) {
    for (int r = 0; r < R; ++r) {
      out[i * R + r] = ReduceRow(acc[r][i], off[r][i], kMin ? 1.0f : (kQ5 ? -16.0f : -8.0f));
    }
  }
}

// out[i R + r] = dot(row w[r], x row i) for R rows of nb Q8_0 blocks and
// MX activation rows, as GemvVnniQ4.
template <int R, int MX, bool kOne>
__attribute__((target("avx512vnni"))) void GemvVnniQ8_0(
    const uint8_t* const* w, int64_t nb, const uint8_t* const* xg, size_t ahead,
    float* out) {
  constexpr int64_t kSecond = 4;
  const __m512i quants = LoadIndex(kQ8_0Quants);
  const __m512i scales = LoadIndex(kQ8_0Scales);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[R][MX], off[R][MX];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < MX; ++i) acc[r][i] = off[r][i] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; b += kQ8Group) {
    const int64_t xo = kQ8GroupBytes * (b / kQ8Group);
    const GroupLoads<34, kSecond, kQ8Group> loads(nb - b < kQ8Group ? nb - b : kQ8Group);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      __m512i v0, v1;
      loads.Load(w[r] + 34 * b, ahead, &v0, &v1);
      // A missing second block reads as u = 128 against zero activations.
      const __m512i u = _mm512_xor_si512(_mm512_permutex2var_epi16(v0, quants, v1), flip);
      const __m512 d = _mm512_cvtph_ps(
          _mm512_castsi512_si256(_mm512_permutexvar_epi16(scales, v0)));
#pragma GCC unroll 4
      for (int i = 0; i < MX; ++i) {
        const uint8_t* xa = xg[i] + xo;
        const __m512i sh = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_load_si512(xa));
        const __m512i sl = kOne ? _mm512_setzero_si512()
                                : _mm512_dpbusd_epi32(_mm512_setzero_si512(), u,
                                                      _mm512_load_si512(xa + 64));
        AccumulateLevels<kOne>(sh, sl, d, _mm512_load_ps(xa + 128), d,
                               _mm512_load_ps(xa + 192), &acc[r][i], &off[r][i]);
      }
    }
  }
  for (int i = 0; i < MX; ++i) {
    for (int r = 0; r < R; ++r) out[i * R + r] = ReduceRow(acc[r][i], off[r][i], -128.0f);
  }
}

// ---- Decode GEMV with int8 dot products: Q4_K and Q6_K ---------------------
// x is quantized per super-block of 256 (not 32) to 16-bit v = 256 h + l as
// above (sx = the super-block's max |x| / 32512), so that d sx is one
// factor per super-block and row and the sub-block scales (integers) apply
// to the int32 sums: per super-block and row
//   Q4_K: d sx sum_s sc_s T_s - dmin sum_s m_s S_s,
//   Q6_K: d sx sum_g sc_g (T_g - 32 V_g),
// T = sum u v over a sub-block (Q4_K, 32 values) or group (Q6_K, 16),
// V_g = sum v over the group, S_s = sx V_s. The products with sc are exact
// in int32 (vpmulld), summed over the super-block, then converted once.
// Bounds per int32 lane (4 values each, |v| <= 32512): Q4_K |T| <= 4 x 15 x
// 32512 = 1.95e6, x sc <= 63, 4 vectors summed: 4.9e8; Q6_K |q - 32| <= 32:
// 4 x 32 x 32512 x 128 (|sc| <= 128) x 4 vectors = 2,130,706,432 < 2^31.
// The error is that of x alone (|x - sx v| <= max|x| / 65024 per
// super-block: 128 times below the int8-per-256 activations of ggml's
// K-quant dot products) plus F32 rounding.
//
// Activation layout per super-block:
//   Q4_K (640 bytes): a 64-byte load p (0, 1) of the 128 nibble bytes holds
//   sub-blocks 4p (low nibbles of its first 32 bytes), 4p + 1 (their high
//   nibbles), 4p + 2, 4p + 3 (the next 32 bytes); at 256 p: [h of sub-blocks
//   4p, 4p + 2][h of 4p + 1, 4p + 3][l of 4p, 4p + 2][l of 4p + 1, 4p + 3];
//   at 512: 16 floats, 0 at lanes 0..7 and S_s at lane 8 + s; at 576: sx.
//   Q6_K (832 bytes): [h of values 0..255 in order][l][int32 per lane of 4
//   values: -32 sum v (the l sums start there)][sx at 768].

constexpr int64_t kQ4_KXBytes = 640, kQ6_KXBytes = 832;

// Lane j of a dword permute: sub-block (or group) index per lane.
struct DwordIndex {
  int32_t v[16];
};
constexpr DwordIndex TwoSubBlocks(int a, int b) {
  DwordIndex t{};
  for (int j = 0; j < 16; ++j) t.v[j] = j < 8 ? a : b;
  return t;
}
constexpr DwordIndex FourGroups(int first) {
  DwordIndex t{};
  for (int j = 0; j < 16; ++j) t.v[j] = first + j / 4;
  return t;
}
// Q4_K: the vectors lo_0, hi_0, lo_1, hi_1 (see the layout) and their
// sub-blocks.
constexpr DwordIndex kQ4_KScaleLanes[4] = {TwoSubBlocks(0, 2), TwoSubBlocks(1, 3),
                                           TwoSubBlocks(4, 6), TwoSubBlocks(5, 7)};
constexpr DwordIndex kQ6_KScaleLanes[4] = {FourGroups(0), FourGroups(4), FourGroups(8),
                                           FourGroups(12)};

inline __m512i LoadDwords(const DwordIndex& t) { return _mm512_loadu_si512(t.v); }

// One weight vector's contribution: sc per lane x (256 sum u h + sum u l),
// with the l sums starting at l_init; with one level (kOne: int8 x, no l
// bytes) sc x (l_init + sum u h).
template <bool kOne>
__attribute__((target("avx512vnni"))) inline __m512i ScaledLevels(__m512i u, const uint8_t* h, const uint8_t* l,
                            __m512i l_init, __m512i sc) {
  if constexpr (kOne) {
    return _mm512_mullo_epi32(_mm512_dpbusd_epi32(l_init, u, _mm512_load_si512(h)), sc);
  }
  const __m512i sh = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_load_si512(h));
  const __m512i sl = _mm512_dpbusd_epi32(l_init, u, _mm512_load_si512(l));
  return _mm512_mullo_epi32(_mm512_add_epi32(_mm512_slli_epi32(sh, 8), sl), sc);
}

// out[i R + r] = dot(row w[r], x row i) for R rows of nsb Q4_K
// super-blocks and MX activation rows, as GemvVnniQ4.
template <int R, int MX, bool kOne>
__attribute__((target("avx512vnni"))) void GemvVnniQ4_K(
    const uint8_t* const* w, int64_t nsb, const uint8_t* const* xg, size_t ahead,
    float* out) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i lanes[4] = {LoadDwords(kQ4_KScaleLanes[0]), LoadDwords(kQ4_KScaleLanes[1]),
                            LoadDwords(kQ4_KScaleLanes[2]), LoadDwords(kQ4_KScaleLanes[3])};
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[R][MX], off[R][MX];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < MX; ++i) acc[r][i] = off[r][i] = _mm512_setzero_ps();
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const int64_t xo = kQ4_KXBytes * sb;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w[r] + 144 * sb;
      Prefetch(blk + ahead);
      Prefetch(blk + ahead + 64);
      Prefetch(blk + ahead + 128);
      const __m512i scm = ScaleMinsQ4_K(blk);
      __m512i u[4], sc[4];
      for (int p = 0; p < 2; ++p) {
        const __m512i q = _mm512_loadu_si512(blk + 16 + 64 * p);
        u[2 * p] = _mm512_and_si512(q, low);
        u[2 * p + 1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
        sc[2 * p] = _mm512_permutexvar_epi32(lanes[2 * p], scm);
        sc[2 * p + 1] = _mm512_permutexvar_epi32(lanes[2 * p + 1], scm);
      }
      const __m512 d = _mm512_set1_ps(HalfAt(blk));
      const __m512 dmin = _mm512_set1_ps(HalfAt(blk + 2));
      const __m512 mins = _mm512_cvtepi32_ps(scm);
#pragma GCC unroll 4
      for (int i = 0; i < MX; ++i) {
        const uint8_t* xa = xg[i] + xo;
        __m512i t = zero;
        for (int p = 0; p < 2; ++p) {
          const uint8_t* xp = xa + 256 * p;
          t = _mm512_add_epi32(t, ScaledLevels<kOne>(u[2 * p], xp, xp + 128, zero, sc[2 * p]));
          t = _mm512_add_epi32(t, ScaledLevels<kOne>(u[2 * p + 1], xp + 64, xp + 192, zero,
                                                     sc[2 * p + 1]));
        }
        const float sx = *reinterpret_cast<const float*>(xa + 576);
        acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(d, _mm512_set1_ps(sx)),
                                    acc[r][i]);
        // Lanes 8..15: m_s S_s (s is zero at lanes 0..7, which hold sc).
        off[r][i] = _mm512_fmadd_ps(_mm512_mul_ps(mins, _mm512_load_ps(xa + 512)), dmin,
                                    off[r][i]);
      }
    }
  }
  for (int i = 0; i < MX; ++i) {
    for (int r = 0; r < R; ++r) out[i * R + r] = ReduceRow(acc[r][i], off[r][i], -1.0f);
  }
}

// out[i R + r] = dot(row w[r], x row i) for R rows of nsb Q6_K super-blocks
// and MX activation rows, as GemvVnniQ4.
template <int R, int MX, bool kOne>
__attribute__((target("avx512vnni"))) void GemvVnniQ6_K(
    const uint8_t* const* w, int64_t nsb, const uint8_t* const* xg, size_t ahead,
    float* out) {
  const __m512i low = _mm512_set1_epi8(0x0F), two = _mm512_set1_epi8(0x30);
  const __m512i lanes[4] = {LoadDwords(kQ6_KScaleLanes[0]), LoadDwords(kQ6_KScaleLanes[1]),
                            LoadDwords(kQ6_KScaleLanes[2]), LoadDwords(kQ6_KScaleLanes[3])};
  __m512 acc[R][MX];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < MX; ++i) acc[r][i] = _mm512_setzero_ps();
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const int64_t xo = kQ6_KXBytes * sb;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w[r] + 210 * sb;
      for (int b = 0; b < 256; b += 64) Prefetch(blk + ahead + b);
      const __m512i sc = _mm512_cvtepi8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
      __m512i u[4], scl[4];
      for (int h = 0; h < 2; ++h) {
        // As UnpackQ6_K: u = the 6-bit q (0..63) of values 128 h + 0..63
        // (u01) and 128 h + 64..127 (u23).
        const __m512i l = _mm512_loadu_si512(blk + 64 * h);
        const __m256i qh =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
        const __m512i hx = _mm512_inserti64x4(_mm512_castsi256_si512(qh),
                                              _mm256_srli_epi16(qh, 2), 1);
        u[2 * h] = _mm512_or_si512(
            _mm512_and_si512(l, low), _mm512_and_si512(_mm512_slli_epi16(hx, 4), two));
        u[2 * h + 1] = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi16(l, 4), low), _mm512_and_si512(hx, two));
        scl[2 * h] = _mm512_permutexvar_epi32(lanes[2 * h], sc);
        scl[2 * h + 1] = _mm512_permutexvar_epi32(lanes[2 * h + 1], sc);
      }
      const __m512 d = _mm512_set1_ps(HalfAt(blk + 208));
#pragma GCC unroll 4
      for (int i = 0; i < MX; ++i) {
        const uint8_t* xa = xg[i] + xo;
        __m512i t = _mm512_setzero_si512();
        for (int h = 0; h < 2; ++h) {
          const uint8_t* x0 = xa + 128 * h;
          const __m512i* init = reinterpret_cast<const __m512i*>(xa + 512) + 2 * h;
          t = _mm512_add_epi32(t, ScaledLevels<kOne>(u[2 * h], x0, x0 + 256,
                                                     _mm512_load_si512(init), scl[2 * h]));
          t = _mm512_add_epi32(t, ScaledLevels<kOne>(u[2 * h + 1], x0 + 64, x0 + 320,
                                                     _mm512_load_si512(init + 1), scl[2 * h + 1]));
        }
        const float sx = *reinterpret_cast<const float*>(xa + 768);
        acc[r][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(d, _mm512_set1_ps(sx)),
                                    acc[r][i]);
      }
    }
  }
  for (int i = 0; i < MX; ++i) {
    for (int r = 0; r < R; ++r) out[i * R + r] = _mm512_reduce_add_ps(acc[r][i]);
  }
}

// int8 x: v clamped to [-127, 127] (x / sx may round a hair past 127).
inline __m512i ClampX(__m512i v, bool int8) {
  if (!int8) return v;
  return _mm512_max_epi32(_mm512_min_epi32(v, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
}

// x[0, k) (k a multiple of 256) quantized per super-block for dtype (Q4_K
// or Q6_K) in the layout above; int8: one level, v = h in [-127, 127] (sx =
// max |x| / 127, as ggml's q8_K), the l bytes left unwritten.
void QuantizeXSuperBlocks(DType dtype, const float* x, int64_t k, bool int8, uint8_t* xg) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512i half = _mm512_set1_epi32(128);
  const bool q4k = dtype == DType::kQ4_K;
  for (int64_t sb = 0; sb < k / 256; ++sb) {
    const float* xs = x + 256 * sb;
    __m512 mx = _mm512_setzero_ps();
    for (int j = 0; j < 256; j += 16) mx = _mm512_max_ps(mx, _mm512_andnot_ps(sign, _mm512_loadu_ps(xs + j)));
    const float step = _mm512_reduce_max_ps(mx) / (int8 ? 127.0f : 32512.0f);
    const __m512 inv = _mm512_set1_ps(InverseStep(step));
    uint8_t* g = xg + (q4k ? kQ4_KXBytes : kQ6_KXBytes) * sb;
    alignas(64) float f[16] = {};
    int32_t v_sum[8] = {};
    // 16 values at a time: sub-block s = j / 32; in Q4_K's layout values
    // 32 s + i go to byte i of half (s / 2) % 2 of vector s % 2 of load s / 4.
    for (int j = 0; j < 256; j += 16) {
      const __m512i q = ClampX(
          _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xs + j), inv)), int8);
      const __m512i hq = int8 ? q : _mm512_srai_epi32(_mm512_add_epi32(q, half), 8);
      const __m512i lq = _mm512_sub_epi32(q, _mm512_slli_epi32(hq, 8));
      int64_t at = j;  // Q6_K: in order
      if (q4k) {
        const int s = j / 32;
        at = 256 * (s / 4) + 64 * (s % 2) + 32 * ((s / 2) % 2) + j % 32;
      }
      const int64_t l_at = q4k ? at + 128 : at + 256;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(g + at), _mm512_cvtepi32_epi8(hq));
      if (!int8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(g + l_at), _mm512_cvtepi32_epi8(lq));
      }
      if (q4k) {
        v_sum[j / 32] += _mm512_reduce_add_epi32(q);
      } else {
        // -32 x the sum of each 4 values, one int32 lane each.
        alignas(64) int32_t v[16];
        _mm512_store_si512(v, q);
        int32_t* init = reinterpret_cast<int32_t*>(g + 512) + j / 4;
        for (int i = 0; i < 4; ++i) {
          init[i] = -32 * (v[4 * i] + v[4 * i + 1] + v[4 * i + 2] + v[4 * i + 3]);
        }
      }
    }
    if (q4k) {
      for (int s = 0; s < 8; ++s) f[8 + s] = step * static_cast<float>(v_sum[s]);
      std::memcpy(g + 512, f, 64);
    }
    std::memcpy(g + (q4k ? 576 : 768), &step, sizeof(step));
  }
}

// y rows [i0, i0 + MX), weight rows [n, n + R) (each pass prefetches the
// next one's rows, `ahead` bytes on).
template <int R, int MX, bool kOne>
void GemvVnniTile(const QuantGemmArgs& g, int64_t n, int64_t i0, size_t ahead) {
  const int64_t nb = g.k / 32, nsb = g.k / 256;
  const uint8_t* w[R];
  for (int r = 0; r < R; ++r) w[r] = g.w + (n + r) * g.row_bytes;
  const uint8_t* xq[MX];
  for (int i = 0; i < MX; ++i) xq[i] = g.xq + (i0 + i) * g.xq_stride;
  float out[MX * R];
  switch (g.dtype) {
    case DType::kQ8_0: GemvVnniQ8_0<R, MX, kOne>(w, nb, xq, ahead, out); break;
    case DType::kQ4_0: GemvVnniQ4<R, MX, DType::kQ4_0, kOne>(w, nb, xq, ahead, out); break;
    case DType::kQ5_0: GemvVnniQ4<R, MX, DType::kQ5_0, kOne>(w, nb, xq, ahead, out); break;
    case DType::kQ5_1: GemvVnniQ4<R, MX, DType::kQ5_1, kOne>(w, nb, xq, ahead, out); break;
    case DType::kQ4_K: GemvVnniQ4_K<R, MX, kOne>(w, nsb, xq, ahead, out); break;
    case DType::kQ6_K: GemvVnniQ6_K<R, MX, kOne>(w, nsb, xq, ahead, out); break;
    default: GemvVnniQ4<R, MX, DType::kQ4_1, kOne>(w, nb, xq, ahead, out); break;
  }
  for (int i = 0; i < MX; ++i) {
    float* y = g.y + (i0 + i) * g.ldy;
    for (int r = 0; r < R; ++r) {
      y[n + r] = out[i * R + r] + (g.bias != nullptr ? g.bias[n + r] : 0.0f);
    }
  }
}

// Weight rows [n, ...) in passes of R up to n_end. With several activation
// rows, chunks of kGemvChunkRows weight rows (L1 / L2 resident after the
// first tile) run against tiles of up to kGemvXRows activation rows (whose
// quantized x stays in L1 across the chunk). Returns the first row not
// done.
template <int R, bool kOne>
int64_t GemvVnniRowsOf(const QuantGemmArgs& g, int64_t n, int64_t n_end) {
  const size_t ahead = R * g.row_bytes;
  while (n + R <= n_end) {
    const int64_t c_end = n + std::min<int64_t>(n_end - n, kGemvChunkRows) / R * R;
    int64_t i = 0;
    if constexpr (kOne) {
      for (; i + kGemvXRows <= g.m; i += kGemvXRows) {
        for (int64_t r = n; r < c_end; r += R) GemvVnniTile<R, kGemvXRows, kOne>(g, r, i, ahead);
      }
      if (i + 2 <= g.m) {
        for (int64_t r = n; r < c_end; r += R) GemvVnniTile<R, 2, kOne>(g, r, i, ahead);
        i += 2;
      }
    }
    for (; i < g.m; ++i) {
      for (int64_t r = n; r < c_end; r += R) GemvVnniTile<R, 1, kOne>(g, r, i, ahead);
    }
    n = c_end;
  }
  return n;
}

template <bool kOne>
void GemvVnniRowsAt(const QuantGemmArgs& args, int64_t n_begin, int64_t n_end) {
  int64_t n = n_begin;
  // One activation row: four weight streams per pass; more: two weight
  // rows against tiles of x rows (the accumulators of 2 x 4 pairs).
  if (args.m == 1) n = GemvVnniRowsOf<kGemvRows, kOne>(args, n, n_end);
  n = GemvVnniRowsOf<2, kOne>(args, n, n_end);
  GemvVnniRowsOf<1, kOne>(args, n, n_end);
}

}  // namespace

void DecodeRowsF32(const QuantGemmArgs& g, int64_t n0, int64_t rows,
                   float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k0 = 0; k0 < g.k; k0 += kPackPiece) {
      const int64_t kc = g.k - k0 < kPackPiece ? g.k - k0 : kPackPiece;
      alignas(64) float tmp[kPackPiece];
      DecodeChunk(g.dtype, g.w + (n0 + r) * g.row_bytes, k0, kc, tmp);
      std::memcpy(out + r * g.k + k0, tmp, kc * sizeof(float));
    }
  }
}

bool QuantVnniSupports(DType dtype) {
  return (dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ4_1 ||
          dtype == DType::kQ5_0 || dtype == DType::kQ5_1 || dtype == DType::kQ4_K ||
          dtype == DType::kQ6_K) &&
         __builtin_cpu_supports("avx512vnni");
}

void QuantGemmVnni(ThreadPool* pool, const QuantGemmArgs& g) {
  const int64_t nbw = g.k / VnniBlockValues(g.dtype);
  std::vector<int8_t> q(g.m * g.k);
  // Each block's offset term: an int32 start of its sum (xoff) or an F32
  // term (dxs), by format.
  const int32_t c = VnniOffsetFactor(g.dtype);
  std::vector<float> dx(g.m * (g.k / 32)), dxs(c == 0 ? g.m * nbw : 0);
  std::vector<int32_t> xoff(c != 0 ? g.m * nbw : 0);
  float* xs = c == 0 ? dxs.data() : nullptr;
  int32_t* xo = c != 0 ? xoff.data() : nullptr;
  QuantizeXTask qt{&g, q.data(), dx.data(), xs, xo, c, g.dtype == DType::kQ6_K};
  qt.superblocks = g.int8_x && (g.dtype == DType::kQ4_K || g.dtype == DType::kQ6_K);
  ParallelForRaw(pool, g.m, 16, &QuantizeXRows, &qt);
  VnniTask t{&g, VnniX{q.data(), dx.data(), xs, xo, nbw}};
  ParallelForRaw(pool, (g.n + kVnniNr - 1) / kVnniNr, 1, &VnniPanelsTask, &t);
}

void QuantizeXInt8(ThreadPool* pool, const QuantGemmArgs& g, int32_t c, bool halves,
                   bool superblocks, int8_t* q, float* dx, float* dxs, int32_t* xoff) {
  QuantizeXTask qt{&g, q, dx, dxs, xoff, c, halves};
  qt.superblocks = superblocks;
  qt.f16_steps = !halves && !superblocks;
  ParallelForRaw(pool, g.m, 16, &QuantizeXRows, &qt);
}

int64_t VnniPackedBytes(DType dtype, int64_t n, int64_t k) {
  return (n + kVnniNr - 1) / kVnniNr * VnniPanelBytes(dtype, k);
}

namespace {
struct PackVnniJob {
  const QuantGemmArgs* g;
  uint8_t* out;
};
void PackVnniTask(void* arg, int64_t begin, int64_t end) {
  const PackVnniJob& job = *static_cast<const PackVnniJob*>(arg);
  const QuantGemmArgs& g = *job.g;
  const int64_t nb = g.k / VnniBlockValues(g.dtype);
  const int64_t panel_bytes = VnniPanelBytes(g.dtype, g.k);
  for (int64_t p = begin; p < end; ++p) {
    const int64_t n0 = p * kVnniNr;
    const int rows = g.n - n0 < kVnniNr ? static_cast<int>(g.n - n0) : kVnniNr;
    uint8_t* pu = job.out + p * panel_bytes;
    float* pd = reinterpret_cast<float*>(pu + g.k * kVnniNr);
    PackVnniPanel(g, n0, rows, nb, pu, pd, pd + nb * kVnniNr);
  }
}
}  // namespace

void PackVnniWeights(ThreadPool* pool, const QuantGemmArgs& g, uint8_t* out) {
  PackVnniJob job{&g, out};
  ParallelForRaw(pool, (g.n + kVnniNr - 1) / kVnniNr, 1, &PackVnniTask, &job);
}

bool GemvVnniSupports(DType dtype) {
  return (dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ4_1 ||
          dtype == DType::kQ5_0 || dtype == DType::kQ5_1 || dtype == DType::kQ4_K ||
          dtype == DType::kQ6_K) &&
         __builtin_cpu_supports("avx512vnni");
}

int64_t GemvVnniXBytes(int64_t k) {
  // 96 bytes per block in groups of 4 (Q4), 128 in groups of 2 (Q8_0); 640
  // and 832 per super-block of 256 (Q4_K, Q6_K).
  return 128 * ((k / 32 + kQ4Group - 1) / kQ4Group * kQ4Group);
}

void GemvVnniQuantizeX(DType dtype, const float* x, int64_t k, bool int8, uint8_t* xg) {
  if (dtype == DType::kQ4_K || dtype == DType::kQ6_K) {
    QuantizeXSuperBlocks(dtype, x, k, int8, xg);
    return;
  }
  const int64_t nb = k / 32;
  const bool q4 = dtype != DType::kQ8_0;
  const int64_t group = q4 ? kQ4Group : kQ8Group;
  const int64_t group_bytes = q4 ? kQ4GroupBytes : kQ8GroupBytes;
  // A partial last group: its missing blocks are zeros.
  if (nb % group != 0) std::memset(xg + group_bytes * (nb / group), 0, group_bytes);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512i half = _mm512_set1_epi32(128);
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b), v1 = _mm512_loadu_ps(x + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1)));
    const float step = amax / (int8 ? 127.0f : 32512.0f);
    const __m512 inv = _mm512_set1_ps(InverseStep(step));
    // Round to nearest even; |v| <= 32512 (amax / step rounds to 32512);
    // int8: v = h, clamped to 127.
    const __m512i q0 = ClampX(_mm512_cvtps_epi32(_mm512_mul_ps(v0, inv)), int8);
    const __m512i q1 = ClampX(_mm512_cvtps_epi32(_mm512_mul_ps(v1, inv)), int8);
    const __m512i h0 = int8 ? q0 : _mm512_srai_epi32(_mm512_add_epi32(q0, half), 8);
    const __m512i h1 = int8 ? q1 : _mm512_srai_epi32(_mm512_add_epi32(q1, half), 8);
    const __m512i l0 = _mm512_sub_epi32(q0, _mm512_slli_epi32(h0, 8));
    const __m512i l1 = _mm512_sub_epi32(q1, _mm512_slli_epi32(h1, 8));
    const float sum =
        step * static_cast<float>(_mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1)));
    const int64_t lane = b % group;
    uint8_t* g = xg + group_bytes * (b / group);
    // Where values 0..15 and 16..31 of h and l go; then sx and S.
    uint8_t *h_lo, *h_hi, *l_lo, *l_hi;
    float* f;
    int lanes;  // int32 lanes per block
    if (q4) {
      h_lo = g + 16 * lane;
      h_hi = h_lo + 64;
      l_lo = h_lo + 128;
      l_hi = h_lo + 192;
      f = reinterpret_cast<float*>(g + 256);
      lanes = 4;
    } else {
      h_lo = g + 32 * lane;
      h_hi = h_lo + 16;
      l_lo = h_lo + 64;
      l_hi = h_lo + 80;
      f = reinterpret_cast<float*>(g + 128);
      lanes = 8;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h_lo), _mm512_cvtepi32_epi8(h0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h_hi), _mm512_cvtepi32_epi8(h1));
    if (!int8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(l_lo), _mm512_cvtepi32_epi8(l0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(l_hi), _mm512_cvtepi32_epi8(l1));
    }
    for (int i = 0; i < lanes; ++i) {
      f[lanes * lane + i] = step;
      f[16 + lanes * lane + i] = i == 0 ? sum : 0.0f;
    }
  }
}

void GemvVnniRows(const QuantGemmArgs& args, int64_t n_begin, int64_t n_end) {
  if (args.int8_x) {
    GemvVnniRowsAt<true>(args, n_begin, n_end);
  } else {
    GemvVnniRowsAt<false>(args, n_begin, n_end);
  }
}

void QuantGemmRows(const QuantGemmArgs& args, int64_t n_begin, int64_t n_end) {
  // Q5_0 / Q5_1 have no F32 GEMV of their own: the panel path decodes them.
  if (args.m == 1 && args.dtype != DType::kQ5_0 && args.dtype != DType::kQ5_1) {
    GemvRows(args, n_begin, n_end);
  } else {
    PanelRows(args, n_begin, n_end);
  }
}

}  // namespace cpu_avx512
}  // namespace inferd
