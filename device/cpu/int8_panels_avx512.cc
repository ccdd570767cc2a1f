// The int8 activation policy's Linear on block-quantized weights repacked
// at load (AVX512_VNNI): one kernel for every M, so a row's output is the
// same bits in any batch, and one weight stream at decode.
//
// Panels of 16 weight rows. Each block's values are stored as vpdpbusd
// reads them: a 64-byte vector holds 4 consecutive values (a "group") of
// each of the 16 rows, as unsigned bytes u (Q8_0: q + 128) or, for the
// 4-bit formats, as nibbles, two groups per vector (the low nibbles one
// group, the high nibbles another): the GGUF block bytes themselves, four
// at a time, transposed across the rows. Q5's fifth bits are 64-bit masks
// per vector. Q6_K's 6-bit values take three vectors per block of 16: groups
// 0-2 in their low 6 bits, group 3 spread over their top 2 bits (six ops
// unpack the four groups). Scales stay in their stored precision (f16 d, m,
// dmin; 6-bit Q4_K scales and minima, int8 Q6_K scales as bytes), beside
// their blocks in regions of the panel. A panel takes the bytes of its rows
// as stored (Q4_K: 148 bytes per super-block and row, was 144).
// Why not llama.cpp's repacked layouts: they interleave 4 or 8 rows for its
// own kernels and exist for a few types; these panels match the int8 GEMM's
// register tile (16 output columns per vector) for all seven types.
//
// Per activation row (quantized as QuantGemmVnni does, per block of 32,
// per super-block of 256 for the K-quants) and weight row, block by block:
//   Q4_0, Q5_0, Q8_0: s = c sum(xq) + sum(u xq) (int32, exact; c = -8,
//     -16, -128), f = fma(float(s), d dx, f);
//   Q4_1, Q5_1: s = sum(u xq), f = fma(float(s), d dx, f), then
//     f = fma(m, dx sum(xq), f);
//   Q4_K, per super-block: t = sum_s sc_s s_s, mt = sum_s m_s sum(xq_s)
//     (int32, exact), f = fma(float(t), d sx, f), f = f - float(mt) dmin sx;
//   Q6_K, per super-block: t = sum_g sc_g (sum(q xq_g) - 32 sum(xq_g)),
//     f = fma(float(t), d sx, f).
// The operations on f are the same whatever the tile a row runs in, so
// results do not depend on M or on the other rows.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "device/bf16.h"
#include "device/cpu/quant_gemm.h"

namespace inferd {
namespace cpu_avx512 {
namespace {

constexpr int kRows = 16;  // weight rows per panel

// Region sizes of one panel (bytes, each a multiple of 64): u (the value
// vectors), hi (Q5 bit masks), sc (K-quant scales and
// minima), d (f16 scales, then Q4_1 / Q5_1 minima or Q4_K dmin).
struct Layout {
  int64_t u = 0, hi = 0, sc = 0, d = 0;
  int64_t total() const { return u + hi + sc + d; }
};

inline int64_t Round64(int64_t b) { return (b + 63) / 64 * 64; }

Layout PanelLayout(DType dtype, int64_t k) {
  const int64_t nb = k / 32, nsb = k / 256;
  Layout l;
  switch (dtype) {
    case DType::kQ8_0:
      l.u = nb * 512;
      l.d = Round64(nb * 32);
      break;
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1: {
      const bool q5 = dtype == DType::kQ5_0 || dtype == DType::kQ5_1;
      const bool with_min = dtype == DType::kQ4_1 || dtype == DType::kQ5_1;
      l.u = nb * 256;
      l.hi = q5 ? nb * 64 : 0;
      l.d = Round64(nb * 32 * (with_min ? 2 : 1));
      break;
    }
    case DType::kQ4_K:
      l.u = nsb * 2048;
      l.sc = nsb * 256;
      l.d = nsb * 64;
      break;
    case DType::kQ6_K:
      l.u = nsb * 3072;
      l.sc = nsb * 256;
      l.d = Round64(nsb * 32);
      break;
    default:
      break;
  }
  return l;
}

inline uint16_t Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// Q4_K's 6-bit scale and minimum of sub-block s (GGUF's packing).
inline void ScaleMinQ4_K(const uint8_t* q, int s, uint8_t* sc, uint8_t* m) {
  if (s < 4) {
    *sc = q[s] & 63;
    *m = q[s + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[s + 4] & 0x0F) | ((q[s - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[s + 4] >> 4) | ((q[s] >> 6) << 4));
  }
}

// Rows [n0, n0 + rows) of g.w into one panel at out (rows past `rows` are
// zeros).
void PackPanel(const QuantGemmArgs& g, int64_t n0, int rows, uint8_t* out) {
  const Layout l = PanelLayout(g.dtype, g.k);
  std::memset(out, 0, l.total());
  uint8_t* u = out;
  uint8_t* hi = out + l.u;
  uint8_t* sc = hi + l.hi;
  uint8_t* d = sc + l.sc;
  const int64_t nb = g.k / 32, nsb = g.k / 256;
  for (int r = 0; r < rows; ++r) {
    const uint8_t* row = g.w + (n0 + r) * g.row_bytes;
    switch (g.dtype) {
      case DType::kQ8_0:
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* blk = row + 34 * b;
          for (int q = 0; q < 8; ++q) {
            for (int j = 0; j < 4; ++j) {
              u[512 * b + 64 * q + 4 * r + j] = static_cast<uint8_t>(blk[2 + 4 * q + j] ^ 0x80);
            }
          }
          std::memcpy(d + 32 * b + 2 * r, blk, 2);
        }
        break;
      case DType::kQ4_0:
      case DType::kQ4_1:
      case DType::kQ5_0:
      case DType::kQ5_1: {
        const bool q5 = g.dtype == DType::kQ5_0 || g.dtype == DType::kQ5_1;
        const bool with_min = g.dtype == DType::kQ4_1 || g.dtype == DType::kQ5_1;
        const int64_t bytes = 18 + (with_min ? 2 : 0) + (q5 ? 4 : 0);
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* blk = row + bytes * b;
          const uint8_t* qs = blk + 2 + (with_min ? 2 : 0) + (q5 ? 4 : 0);
          // Vector q: low nibbles values 4q..4q+3, high 16+4q..16+4q+3, as
          // in the block's bytes 4q..4q+3.
          for (int q = 0; q < 4; ++q) std::memcpy(u + 256 * b + 64 * q + 4 * r, qs + 4 * q, 4);
          if (q5) {
            uint32_t qh;
            std::memcpy(&qh, qs - 4, 4);
            for (int q = 0; q < 4; ++q) {
              uint64_t lo, hv;
              std::memcpy(&lo, hi + 64 * b + 16 * q, 8);
              std::memcpy(&hv, hi + 64 * b + 16 * q + 8, 8);
              lo |= static_cast<uint64_t>((qh >> (4 * q)) & 0xF) << (4 * r);
              hv |= static_cast<uint64_t>((qh >> (16 + 4 * q)) & 0xF) << (4 * r);
              std::memcpy(hi + 64 * b + 16 * q, &lo, 8);
              std::memcpy(hi + 64 * b + 16 * q + 8, &hv, 8);
            }
          }
          std::memcpy(d + 32 * b + 2 * r, blk, 2);
          if (with_min) std::memcpy(d + 32 * nb + 32 * b + 2 * r, blk + 2, 2);
        }
        break;
      }
      case DType::kQ4_K:
        for (int64_t s = 0; s < nsb; ++s) {
          const uint8_t* blk = row + 144 * s;
          // Vector (p, q): low nibbles values 64p + 4q.. (sub-block 2p),
          // high 64p + 32 + 4q.. (2p + 1): bytes 32p + 4q.. of qs.
          for (int p = 0; p < 4; ++p) {
            for (int q = 0; q < 8; ++q) {
              std::memcpy(u + 2048 * s + 64 * (8 * p + q) + 4 * r, blk + 16 + 32 * p + 4 * q, 4);
            }
          }
          for (int sub = 0; sub < 8; ++sub) {
            ScaleMinQ4_K(blk + 4, sub, sc + 256 * s + 16 * sub + r,
                         sc + 256 * s + 128 + 64 * (sub / 4) + 4 * r + sub % 4);
          }
          std::memcpy(d + 64 * s + 2 * r, blk, 2);
          std::memcpy(d + 64 * s + 32 + 2 * r, blk + 2, 2);
        }
        break;
      case DType::kQ6_K:
        for (int64_t s = 0; s < nsb; ++s) {
          const uint8_t* blk = row + 210 * s;
          // The 6-bit q of the super-block's 256 values (GGUF's ql / qh).
          uint8_t q[256];
          for (int n = 0; n < 2; ++n) {
            const uint8_t* ql = blk + 64 * n;
            const uint8_t* qh = blk + 128 + 32 * n;
            for (int i = 0; i < 32; ++i) {
              q[128 * n + i] = static_cast<uint8_t>((ql[i] & 0xF) | ((qh[i] & 3) << 4));
              q[128 * n + i + 32] =
                  static_cast<uint8_t>((ql[i + 32] & 0xF) | (((qh[i] >> 2) & 3) << 4));
              q[128 * n + i + 64] = static_cast<uint8_t>((ql[i] >> 4) | (((qh[i] >> 4) & 3) << 4));
              q[128 * n + i + 96] =
                  static_cast<uint8_t>((ql[i + 32] >> 4) | (((qh[i] >> 6) & 3) << 4));
            }
          }
          // Block t of 16 values: three vectors g = 0, 1, 2 hold groups g
          // in their low 6 bits and, in bits 6-7, bits 2g, 2g + 1 of group
          // 3's values.
          for (int t = 0; t < 16; ++t) {
            for (int g = 0; g < 3; ++g) {
              for (int j = 0; j < 4; ++j) {
                u[3072 * s + 192 * t + 64 * g + 4 * r + j] = static_cast<uint8_t>(
                    q[16 * t + 4 * g + j] | (((q[16 * t + 12 + j] >> (2 * g)) & 3) << 6));
              }
            }
            sc[256 * s + 16 * t + r] = blk[192 + t];
          }
          std::memcpy(d + 32 * s + 2 * r, blk + 208, 2);
        }
        break;
      default:
        break;
    }
  }
}

// Activations quantized for the panels (QuantizeXInt8), row i's values at
// q + i * k.
struct PanelX {
  const int8_t* q;
  const float* dx;     // [m][k / 32]
  const float* dxs;    // [m][k / 32]: Q4_1 / Q5_1
  const int32_t* xoff; // [m][weight blocks]: c sum(xq) (Q4_K: c = 1, per 32)
  // Q4_K: [m][k / 256][16] the sub-blocks' sums as two int8 levels, sum =
  // 64 h + l: h of sub-blocks 0..7, then l (for vpdpbusd with the minima).
  const int8_t* xsub;
  int64_t k;
};

// Prefetch distance (bytes) on a panel's value vectors, into L2: at M = 1
// the weights stream from memory once.
constexpr int64_t kAhead = 4096;

inline void Ahead(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p + kAhead), _MM_HINT_T2);
}

inline __m512i Bcast(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

inline __m512 HalvesF32(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}

// y rows [i0, i0 + MR) of NP adjacent panels (16 NP columns; panel q at
// panel + q * l.total()): the 32-value formats. With two panels each
// activation broadcast feeds two dot products.
template <int MR, int NP, DType kFmt>
__attribute__((target("avx512vnni"))) void TileBlocks(const PanelX& x, const uint8_t* panel,
                                                      const Layout& l, int64_t i0,
                                                      __m512 (*f)[4]) {
  constexpr bool kQ8 = kFmt == DType::kQ8_0;
  constexpr bool kQ5 = kFmt == DType::kQ5_0 || kFmt == DType::kQ5_1;
  constexpr bool kMin = kFmt == DType::kQ4_1 || kFmt == DType::kQ5_1;
  // One row: a second int32 sum per panel (even and odd vectors), for
  // shorter dependency chains (the integer total is the same).
  constexpr bool kSplit = MR * NP <= 2;
  const int64_t nb = x.k / 32;
  const int64_t stride = l.total();
  const uint8_t* u = panel;
  const uint8_t* hi = panel + l.u;
  const uint8_t* d16 = hi + l.hi + l.sc;
  const __m512i low = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
  const int8_t* xq[MR];
  for (int i = 0; i < MR; ++i) xq[i] = x.q + (i0 + i) * x.k;
  for (int64_t b = 0; b < nb; ++b) {
    __m512i s[MR][NP], s2[MR][NP];
    for (int i = 0; i < MR; ++i) {
      for (int p = 0; p < NP; ++p) {
        s[i][p] = kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(x.xoff[(i0 + i) * nb + b]);
        s2[i][p] = _mm512_setzero_si512();
      }
    }
    if constexpr (kQ8) {
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) {
        __m512i w[NP];
        for (int p = 0; p < NP; ++p) {
          const uint8_t* v = u + p * stride + 512 * b + 64 * q;
          Ahead(v);
          w[p] = _mm512_load_si512(v);
        }
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
          const __m512i a = Bcast(xq[i] + 32 * b + 4 * q);
          for (int p = 0; p < NP; ++p) {
            if (kSplit && q % 2 == 1) {
              s2[i][p] = _mm512_dpbusd_epi32(s2[i][p], w[p], a);
            } else {
              s[i][p] = _mm512_dpbusd_epi32(s[i][p], w[p], a);
            }
          }
        }
      }
    } else {
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        __m512i lo[NP], hv[NP];
        for (int p = 0; p < NP; ++p) {
          const uint8_t* vp = u + p * stride + 256 * b + 64 * q;
          Ahead(vp);
          const __m512i v = _mm512_load_si512(vp);
          lo[p] = _mm512_and_si512(v, low);
          hv[p] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
          if constexpr (kQ5) {
            __mmask64 mlo, mhi;
            const uint8_t* h = hi + p * stride + 64 * b + 16 * q;
            std::memcpy(&mlo, h, 8);
            std::memcpy(&mhi, h + 8, 8);
            lo[p] = _mm512_or_si512(lo[p], _mm512_maskz_mov_epi8(mlo, bit4));
            hv[p] = _mm512_or_si512(hv[p], _mm512_maskz_mov_epi8(mhi, bit4));
          }
        }
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
          const __m512i a0 = Bcast(xq[i] + 32 * b + 4 * q);
          const __m512i a1 = Bcast(xq[i] + 32 * b + 16 + 4 * q);
          for (int p = 0; p < NP; ++p) {
            s[i][p] = _mm512_dpbusd_epi32(s[i][p], lo[p], a0);
            if (kSplit) {
              s2[i][p] = _mm512_dpbusd_epi32(s2[i][p], hv[p], a1);
            } else {
              s[i][p] = _mm512_dpbusd_epi32(s[i][p], hv[p], a1);
            }
          }
        }
      }
    }
    for (int p = 0; p < NP; ++p) {
      const __m512 d = HalvesF32(d16 + p * stride + 32 * b);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m512 sx = _mm512_set1_ps(x.dx[(i0 + i) * nb + b]);
        const __m512i t = kSplit ? _mm512_add_epi32(s[i][p], s2[i][p]) : s[i][p];
        f[i][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(d, sx), f[i][p]);
      }
      if constexpr (kMin) {
        const __m512 m = HalvesF32(d16 + p * stride + 32 * nb + 32 * b);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
          f[i][p] = _mm512_fmadd_ps(m, _mm512_set1_ps(x.dxs[(i0 + i) * nb + b]), f[i][p]);
        }
      }
    }
  }
}

// As TileBlocks for Q4_K.
template <int MR, int NP>
__attribute__((target("avx512vnni"))) void TileQ4_K(const PanelX& x, const uint8_t* panel,
                                                    const Layout& l, int64_t i0,
                                                    __m512 (*f)[4]) {
  const int64_t nsb = x.k / 256, nb = x.k / 32;
  const int64_t stride = l.total();
  const uint8_t* u = panel;
  const uint8_t* scm = panel + l.u + l.hi;
  const uint8_t* d16 = scm + l.sc;
  const __m512i low = _mm512_set1_epi8(0x0F);
  const int8_t* xq[MR];
  for (int i = 0; i < MR; ++i) xq[i] = x.q + (i0 + i) * x.k;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    __m512i t[MR][NP];
    for (int i = 0; i < MR; ++i) {
      for (int c = 0; c < NP; ++c) t[i][c] = _mm512_setzero_si512();
    }
    for (int p = 0; p < 4; ++p) {
      __m512i s0[MR][NP], s1[MR][NP];
      for (int i = 0; i < MR; ++i) {
        for (int c = 0; c < NP; ++c) s0[i][c] = s1[i][c] = _mm512_setzero_si512();
      }
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) {
        __m512i lo[NP], hv[NP];
        for (int c = 0; c < NP; ++c) {
          const uint8_t* vp = u + c * stride + 2048 * sb + 64 * (8 * p + q);
          Ahead(vp);
          const __m512i v = _mm512_load_si512(vp);
          lo[c] = _mm512_and_si512(v, low);
          hv[c] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
        }
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
          const int8_t* xp = xq[i] + 256 * sb + 64 * p + 4 * q;
          const __m512i a0 = Bcast(xp), a1 = Bcast(xp + 32);
          for (int c = 0; c < NP; ++c) {
            s0[i][c] = _mm512_dpbusd_epi32(s0[i][c], lo[c], a0);
            s1[i][c] = _mm512_dpbusd_epi32(s1[i][c], hv[c], a1);
          }
        }
      }
      for (int c = 0; c < NP; ++c) {
        const uint8_t* sc = scm + c * stride + 256 * sb;
        const __m512i c0 = _mm512_cvtepu8_epi32(
            _mm_load_si128(reinterpret_cast<const __m128i*>(sc + 16 * (2 * p))));
        const __m512i c1 = _mm512_cvtepu8_epi32(
            _mm_load_si128(reinterpret_cast<const __m128i*>(sc + 16 * (2 * p + 1))));
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
          t[i][c] = _mm512_add_epi32(t[i][c], _mm512_add_epi32(_mm512_mullo_epi32(s0[i][c], c0),
                                                                _mm512_mullo_epi32(s1[i][c], c1)));
        }
      }
    }
    for (int c = 0; c < NP; ++c) {
      const uint8_t* sc = scm + c * stride + 256 * sb;
      const __m512 d = HalvesF32(d16 + c * stride + 64 * sb);
      const __m512 dmin = HalvesF32(d16 + c * stride + 64 * sb + 32);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        // m_s sum(xq_s) over the 8 sub-blocks: the minima of sub-blocks
        // 0-3 and 4-7 as a row's dword, against the sums' two levels.
        const int8_t* xs = x.xsub + ((i0 + i) * nsb + sb) * 16;
        const __m512i m0 = _mm512_load_si512(sc + 128), m1 = _mm512_load_si512(sc + 192);
        const __m512i mh = _mm512_dpbusd_epi32(
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), m0, Bcast(xs)), m1, Bcast(xs + 4));
        const __m512i ml = _mm512_dpbusd_epi32(
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), m0, Bcast(xs + 8)), m1, Bcast(xs + 12));
        const __m512i mt = _mm512_add_epi32(_mm512_slli_epi32(mh, 6), ml);
        const __m512 sx = _mm512_set1_ps(x.dx[(i0 + i) * nb + 8 * sb]);
        f[i][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[i][c]), _mm512_mul_ps(d, sx), f[i][c]);
        f[i][c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mt), _mm512_mul_ps(dmin, sx), f[i][c]);
      }
    }
  }
}

// As TileBlocks for Q6_K.
template <int MR, int NP>
__attribute__((target("avx512vnni"))) void TileQ6_K(const PanelX& x, const uint8_t* panel,
                                                    const Layout& l, int64_t i0,
                                                    __m512 (*f)[4]) {
  const int64_t nsb = x.k / 256, nb = x.k / 32;
  const int64_t stride = l.total();
  const uint8_t* u = panel;
  const uint8_t* scs = panel + l.u + l.hi;
  const uint8_t* d16 = scs + l.sc;
  const __m512i six = _mm512_set1_epi8(0x3F), m03 = _mm512_set1_epi8(0x03),
                m0f = _mm512_set1_epi8(0x0F);
  const int8_t* xq[MR];
  for (int i = 0; i < MR; ++i) xq[i] = x.q + (i0 + i) * x.k;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    __m512i t[MR][NP];
    for (int i = 0; i < MR; ++i) {
      for (int e = 0; e < NP; ++e) t[i][e] = _mm512_setzero_si512();
    }
    for (int g = 0; g < 16; ++g) {
      __m512i w[NP][4];
      for (int e = 0; e < NP; ++e) {
        const uint8_t* v = u + e * stride + 3072 * sb + 192 * g;
        Ahead(v);
        Ahead(v + 64);
        Ahead(v + 128);
        const __m512i a = _mm512_load_si512(v), b = _mm512_load_si512(v + 64),
                      c = _mm512_load_si512(v + 128);
        w[e][0] = _mm512_and_si512(a, six);
        w[e][1] = _mm512_and_si512(b, six);
        w[e][2] = _mm512_and_si512(c, six);
        // Group 3: bits 6-7 of a, b, c to bits 0-1, 2-3, 4-5 (0xE4:
        // the first operand where the mask is set, else the second).
        const __m512i ab = _mm512_ternarylogic_epi32(_mm512_srli_epi16(a, 6),
                                                     _mm512_srli_epi16(b, 4), m03, 0xE4);
        w[e][3] = _mm512_and_si512(
            _mm512_ternarylogic_epi32(ab, _mm512_srli_epi16(c, 2), m0f, 0xE4), six);
      }
      __m512i s[MR][NP];
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        // x.xoff per block of 16: -32 sum(xq).
        const __m512i o = _mm512_set1_epi32(x.xoff[(i0 + i) * 2 * nb + 16 * sb + g]);
        const int8_t* xp = xq[i] + 256 * sb + 16 * g;
        for (int e = 0; e < NP; ++e) s[i][e] = o;
        for (int v = 0; v < 4; ++v) {
          const __m512i a = Bcast(xp + 4 * v);
          for (int e = 0; e < NP; ++e) s[i][e] = _mm512_dpbusd_epi32(s[i][e], w[e][v], a);
        }
      }
      for (int e = 0; e < NP; ++e) {
        const __m512i c = _mm512_cvtepi8_epi32(_mm_load_si128(
            reinterpret_cast<const __m128i*>(scs + e * stride + 256 * sb + 16 * g)));
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
          t[i][e] = _mm512_add_epi32(t[i][e], _mm512_mullo_epi32(s[i][e], c));
        }
      }
    }
    for (int e = 0; e < NP; ++e) {
      const __m512 d = HalvesF32(d16 + e * stride + 32 * sb);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m512 sx = _mm512_set1_ps(x.dx[(i0 + i) * nb + 8 * sb]);
        f[i][e] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[i][e]), _mm512_mul_ps(d, sx), f[i][e]);
      }
    }
  }
}

// y rows [i0, i0 + MR), columns [n0, n0 + nvalid) of NP panels (NP = 2
// for the 32-value formats only).
template <int MR, int NP>
void Tile(DType dtype, const PanelX& x, const uint8_t* panel, const Layout& l, int64_t i0,
          float* y, int64_t ldy, int nvalid, const float* bias) {
  __m512 f[MR][4];
  for (int i = 0; i < MR; ++i) {
    for (int p = 0; p < NP; ++p) f[i][p] = _mm512_setzero_ps();
  }
  switch (dtype) {
    case DType::kQ8_0: TileBlocks<MR, NP, DType::kQ8_0>(x, panel, l, i0, f); break;
    case DType::kQ4_0: TileBlocks<MR, NP, DType::kQ4_0>(x, panel, l, i0, f); break;
    case DType::kQ4_1: TileBlocks<MR, NP, DType::kQ4_1>(x, panel, l, i0, f); break;
    case DType::kQ5_0: TileBlocks<MR, NP, DType::kQ5_0>(x, panel, l, i0, f); break;
    case DType::kQ5_1: TileBlocks<MR, NP, DType::kQ5_1>(x, panel, l, i0, f); break;
    case DType::kQ4_K: TileQ4_K<MR, NP>(x, panel, l, i0, f); break;
    default: TileQ6_K<MR, NP>(x, panel, l, i0, f); break;
  }
  for (int p = 0; p < NP; ++p) {
    const int valid = nvalid - kRows * p;
    const __mmask16 mask = valid >= kRows ? 0xFFFF : static_cast<__mmask16>((1u << valid) - 1);
    const __m512 b =
        bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias + kRows * p) : _mm512_setzero_ps();
    for (int i = 0; i < MR; ++i) {
      _mm512_mask_storeu_ps(y + (i0 + i) * ldy + kRows * p, mask, _mm512_add_ps(f[i][p], b));
    }
  }
}

// All activation rows against NP panels: tiles of MR rows, then the rest.
template <int MR, int NP>
void Rows(const QuantGemmArgs& g, const PanelX& x, const uint8_t* panel, const Layout& l,
          float* y, int nvalid, const float* bias) {
  int64_t i = 0;
  for (; i + MR <= g.m; i += MR) Tile<MR, NP>(g.dtype, x, panel, l, i, y, g.ldy, nvalid, bias);
  if constexpr (MR > 4) {
    for (; i + 4 <= g.m; i += 4) Tile<4, NP>(g.dtype, x, panel, l, i, y, g.ldy, nvalid, bias);
  }
  if constexpr (MR > 2) {
    for (; i + 2 <= g.m; i += 2) Tile<2, NP>(g.dtype, x, panel, l, i, y, g.ldy, nvalid, bias);
  }
  for (; i < g.m; ++i) Tile<1, NP>(g.dtype, x, panel, l, i, y, g.ldy, nvalid, bias);
}

struct PanelTask {
  const QuantGemmArgs* g;
  PanelX x;
  Layout l;
};

// Panels [begin, end), several per tile where the registers allow (each
// activation broadcast feeds all of them): one activation row, 4 panels
// (more independent sums in flight for the decode); else the 32-value
// formats in tiles of 6 rows x 2 panels (Q8_0 at 2-3 rows: 8 x 1, its
// loads the limit), the K-quants (two more sums per tile) 2 x 2 below 4
// rows, else 6 x 1.
void PanelsTask(void* arg, int64_t begin, int64_t end) {
  const PanelTask& t = *static_cast<const PanelTask*>(arg);
  const QuantGemmArgs& g = *t.g;
  const bool k_quant = g.dtype == DType::kQ4_K || g.dtype == DType::kQ6_K;
  const bool pairs = k_quant ? g.m < 4 : g.dtype != DType::kQ8_0 || g.m >= 4;
  // The scales of the first panels: their regions follow the values, which
  // the kernels prefetch as they stream.
  const int64_t stride = t.l.total(), scales = t.l.hi + t.l.sc + t.l.d;
  auto prefetch_scales = [&](int64_t p) {
    if (p >= end) return;
    const uint8_t* s = g.packed + p * stride + t.l.u;
    for (int64_t b = 0; b < scales; b += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(s + b), _MM_HINT_T2);
    }
  };
  prefetch_scales(begin);
  prefetch_scales(begin + 1);
  for (int64_t p = begin; p < end;) {
    const int64_t n0 = p * kRows;
    const int np = g.m == 1 && p + 3 < end ? 4 : pairs && p + 1 < end ? 2 : 1;
    // The next ones' while these compute.
    for (int q = 0; q < np; ++q) prefetch_scales(p + np + q);
    const int nvalid = static_cast<int>(std::min<int64_t>(g.n - n0, kRows * np));
    const uint8_t* panel = g.packed + p * t.l.total();
    float* y = g.y + n0;
    const float* bias = g.bias != nullptr ? g.bias + n0 : nullptr;
    if (np == 4) {
      Rows<1, 4>(g, t.x, panel, t.l, y, nvalid, bias);
    } else if (k_quant) {
      if (np == 2) {
        Rows<2, 2>(g, t.x, panel, t.l, y, nvalid, bias);
      } else {
        Rows<6, 1>(g, t.x, panel, t.l, y, nvalid, bias);
      }
    } else if (np == 2) {
      Rows<6, 2>(g, t.x, panel, t.l, y, nvalid, bias);
    } else {
      Rows<8, 1>(g, t.x, panel, t.l, y, nvalid, bias);
    }
    p += np;
  }
}

struct PackTask {
  const QuantGemmArgs* g;
  uint8_t* out;
  int64_t panel_bytes;
};

void PackPanelsTask(void* arg, int64_t begin, int64_t end) {
  const PackTask& t = *static_cast<const PackTask*>(arg);
  for (int64_t p = begin; p < end; ++p) {
    const int64_t n0 = p * kRows;
    const int rows = t.g->n - n0 < kRows ? static_cast<int>(t.g->n - n0) : kRows;
    PackPanel(*t.g, n0, rows, t.out + p * t.panel_bytes);
  }
}

}  // namespace

bool Int8PanelsSupport(DType dtype, int64_t k) {
  const int64_t block = dtype == DType::kQ4_K || dtype == DType::kQ6_K ? 256 : 32;
  return (dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ4_1 ||
          dtype == DType::kQ5_0 || dtype == DType::kQ5_1 || dtype == DType::kQ4_K ||
          dtype == DType::kQ6_K) &&
         k > 0 && k % block == 0 && __builtin_cpu_supports("avx512vnni");
}

int64_t Int8PanelsBytes(DType dtype, int64_t n, int64_t k) {
  return (n + kRows - 1) / kRows * PanelLayout(dtype, k).total();
}

void PackInt8Panels(ThreadPool* pool, const QuantGemmArgs& g, uint8_t* out) {
  PackTask t{&g, out, PanelLayout(g.dtype, g.k).total()};
  ParallelForRaw(pool, (g.n + kRows - 1) / kRows, 1, &PackPanelsTask, &t);
}

void Int8PanelsGemm(ThreadPool* pool, const QuantGemmArgs& g) {
  const bool k_quant = g.dtype == DType::kQ4_K || g.dtype == DType::kQ6_K;
  const bool q6k = g.dtype == DType::kQ6_K;
  const bool with_min = g.dtype == DType::kQ4_1 || g.dtype == DType::kQ5_1;
  const int64_t nb = g.k / 32;
  // Per-call buffers, reused by this thread.
  static thread_local std::vector<int8_t> q;
  static thread_local std::vector<float> dx, dxs;
  static thread_local std::vector<int32_t> xoff;
  const size_t m = static_cast<size_t>(g.m);
  if (q.size() < m * g.k) q.resize(m * g.k);
  if (dx.size() < m * nb) dx.resize(m * nb);
  if (with_min && dxs.size() < m * nb) dxs.resize(m * nb);
  const size_t offs = m * nb * (q6k ? 2 : 1);
  if (!with_min && xoff.size() < offs) xoff.resize(offs);
  // c sum(xq) per weight block (Q4_K: the plain sums per sub-block of 32).
  const int32_t c = g.dtype == DType::kQ8_0   ? -128
                    : g.dtype == DType::kQ4_0 ? -8
                    : g.dtype == DType::kQ5_0 ? -16
                    : q6k                     ? -32
                    : with_min                ? 0
                                              : 1;
  QuantizeXInt8(pool, g, c, q6k, k_quant, q.data(), dx.data(),
                with_min ? dxs.data() : nullptr, with_min ? nullptr : xoff.data());
  static thread_local std::vector<int8_t> xsub;
  if (g.dtype == DType::kQ4_K) {
    // |sum| <= 32 x 127: h = floor((sum + 32) / 64) in [-63, 64], l = sum -
    // 64 h in [-32, 31].
    const int64_t nsb = g.k / 256;
    if (xsub.size() < m * nsb * 16) xsub.resize(m * nsb * 16);
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t sb = 0; sb < nsb; ++sb) {
        int8_t* out = xsub.data() + (i * nsb + sb) * 16;
        for (int s = 0; s < 8; ++s) {
          const int32_t v = xoff[i * nb + 8 * sb + s];
          const int32_t h = (v + 32) >> 6;
          out[s] = static_cast<int8_t>(h);
          out[8 + s] = static_cast<int8_t>(v - 64 * h);
        }
      }
    }
  }
  PanelTask t{&g, PanelX{q.data(), dx.data(), dxs.data(), xoff.data(), xsub.data(), g.k},
              PanelLayout(g.dtype, g.k)};
  ParallelForRaw(pool, (g.n + kRows - 1) / kRows, 1, &PanelsTask, &t);
}

}  // namespace cpu_avx512
}  // namespace inferd
