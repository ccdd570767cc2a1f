// Quantized / F16 weight GEMV and small-M GEMM with 256-bit AVX2 + FMA +
// F16C intrinsics: each weight block is decoded in registers (nibbles or
// bytes -> int32 -> float) and multiplied with F32 activations; the block
// scale multiplies the block's partial dot product, and the Q4_0/Q4_1/Q4_K
// offsets use the precomputed per-32 sums of x (sum x*(d q + m) = d sum x q
// + m sum x). Included inside an anonymous namespace by quant_avx2.cc, which
// defines nothing before it (quant_avx512.cc has its own 512-bit kernels);
// raw pointers only (see device/CMakeLists.txt on ISA units).

// Activation rows applied per pass over a weight row (accumulators + decoded
// weights fit the 16 ymm registers).
constexpr int kRowsPerPass = 4;
// Weight rows per block: a block's bytes stay in L1 while all activation
// rows are run against it.
constexpr int64_t kWeightRowBlock = 8;

inline float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// 8 bytes at p, zero- or sign-extended to int32 lanes.
inline __m256i U8x8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i I8x8(const uint8_t* p) {
  return _mm256_cvtepi8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

inline float HSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// sum over 8 * C lanes of w[c] * x[8c ..].
template <int C>
inline __m256 Dot(const __m256* w, const float* x) {
  __m256 t = _mm256_mul_ps(w[0], _mm256_loadu_ps(x));
#pragma GCC unroll 4
  for (int c = 1; c < C; ++c) t = _mm256_fmadd_ps(w[c], _mm256_loadu_ps(x + 8 * c), t);
  return t;
}

inline __m256 ToF(__m256i v) { return _mm256_cvtepi32_ps(v); }

// Each RowXxx<M> computes out[i] = dot(weight row w, x[i]) for i < M.

template <int M>
void RowQ8_0(const uint8_t* w, int64_t k, const float* const* x,
             const float* const*, float* out) {
  __m256 acc[M];
  for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < k / 32; ++b) {
    const uint8_t* blk = w + 34 * b;
    const __m256 d = _mm256_set1_ps(HalfAt(blk));
    __m256 wv[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) wv[c] = ToF(I8x8(blk + 2 + 8 * c));
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      acc[i] = _mm256_fmadd_ps(Dot<4>(wv, x[i] + 32 * b), d, acc[i]);
    }
  }
  for (int i = 0; i < M; ++i) out[i] = HSum(acc[i]);
}

// Q4_1 (x = d q + m) and Q4_0 (the same with m = -8 d, which saves the
// integer subtraction per value): the block offsets m_b are gathered 8 at a
// time and dotted with xsum.
template <int M, bool kQ4_0>
void RowQ4(const uint8_t* w, int64_t k, const float* const* x,
           const float* const* xsum, float* out) {
  constexpr int kBlockBytes = kQ4_0 ? 18 : 20;
  constexpr int kNibbles = kQ4_0 ? 2 : 4;
  const __m256i low = _mm256_set1_epi32(0x0F);
  __m256 acc[M], corr[M];
  float tail[M];
  for (int i = 0; i < M; ++i) {
    acc[i] = _mm256_setzero_ps();
    corr[i] = _mm256_setzero_ps();
    tail[i] = 0.0f;
  }
  const int64_t nb = k / 32;
  alignas(32) float mins[8];
  for (int64_t b0 = 0; b0 < nb; b0 += 8) {
    const int64_t b1 = nb - b0 < 8 ? nb : b0 + 8;
    for (int64_t b = b0; b < b1; ++b) {
      const uint8_t* blk = w + kBlockBytes * b;
      const float db = HalfAt(blk);
      const __m256 d = _mm256_set1_ps(db);
      mins[b - b0] = kQ4_0 ? -8.0f * db : HalfAt(blk + 2);
      const __m256i v0 = U8x8(blk + kNibbles), v1 = U8x8(blk + kNibbles + 8);
      __m256 wv[4];
      wv[0] = ToF(_mm256_and_si256(v0, low));
      wv[1] = ToF(_mm256_and_si256(v1, low));
      wv[2] = ToF(_mm256_srli_epi32(v0, 4));
      wv[3] = ToF(_mm256_srli_epi32(v1, 4));
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) {
        acc[i] = _mm256_fmadd_ps(Dot<4>(wv, x[i] + 32 * b), d, acc[i]);
      }
    }
    if (b1 - b0 == 8) {
      const __m256 mv = _mm256_load_ps(mins);
      for (int i = 0; i < M; ++i) {
        corr[i] = _mm256_fmadd_ps(mv, _mm256_loadu_ps(xsum[i] + b0), corr[i]);
      }
    } else {
      for (int i = 0; i < M; ++i) {
        float c = 0.0f;
        for (int64_t j = b0; j < b1; ++j) c += mins[j - b0] * xsum[i][j];
        tail[i] = c;
      }
    }
  }
  for (int i = 0; i < M; ++i) out[i] = HSum(acc[i]) + HSum(corr[i]) + tail[i];
}

inline void ScaleMinQ4K(const uint8_t* s, int* sc, int* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    m[j] = s[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    m[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

template <int M>
void RowQ4_K(const uint8_t* w, int64_t k, const float* const* x,
             const float* const* xsum, float* out) {
  const __m256i low = _mm256_set1_epi32(0x0F);
  __m256 acc[M], corr[M];
  for (int i = 0; i < M; ++i) {
    acc[i] = _mm256_setzero_ps();
    corr[i] = _mm256_setzero_ps();
  }
  for (int64_t sb = 0; sb < k / 256; ++sb) {
    const uint8_t* blk = w + 144 * sb;
    const float d = HalfAt(blk), dmin = HalfAt(blk + 2);
    int sc[8], mn[8];
    ScaleMinQ4K(blk + 4, sc, mn);
    alignas(32) float mins[8];
    for (int j = 0; j < 8; ++j) mins[j] = dmin * static_cast<float>(mn[j]);
    const __m256 mv = _mm256_load_ps(mins);
    for (int i = 0; i < M; ++i) {
      corr[i] = _mm256_fmadd_ps(mv, _mm256_loadu_ps(xsum[i] + 8 * sb), corr[i]);
    }
    for (int p = 0; p < 4; ++p) {
      const uint8_t* q = blk + 16 + 32 * p;
      __m256 lo[4], hi[4];
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m256i v = U8x8(q + 8 * c);
        lo[c] = ToF(_mm256_and_si256(v, low));
        hi[c] = ToF(_mm256_srli_epi32(v, 4));
      }
      const __m256 d1 = _mm256_set1_ps(d * static_cast<float>(sc[2 * p]));
      const __m256 d2 = _mm256_set1_ps(d * static_cast<float>(sc[2 * p + 1]));
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) {
        const float* xp = x[i] + 256 * sb + 64 * p;
        acc[i] = _mm256_fmadd_ps(Dot<4>(lo, xp), d1, acc[i]);
        acc[i] = _mm256_fmadd_ps(Dot<4>(hi, xp + 32), d2, acc[i]);
      }
    }
  }
  for (int i = 0; i < M; ++i) out[i] = HSum(acc[i]) - HSum(corr[i]);
}

template <int M>
void RowQ6_K(const uint8_t* w, int64_t k, const float* const* x,
             const float* const*, float* out) {
  const __m256i low = _mm256_set1_epi32(0x0F), two = _mm256_set1_epi32(0x30),
                off = _mm256_set1_epi32(32);
  __m256 acc[M];
  for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < k / 256; ++sb) {
    const uint8_t* blk = w + 210 * sb;
    const float d = HalfAt(blk + 208);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk + 64 * h;
      const uint8_t* qh = blk + 128 + 32 * h;
      const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192) + 8 * h;
      for (int g = 0; g < 32; g += 16) {
        // Quarter r of the half: values 32 r + g .. + 16, one scale each.
        __m256 q[4][2];
#pragma GCC unroll 2
        for (int t = 0; t < 2; ++t) {
          const int l = g + 8 * t;
          const __m256i a = U8x8(ql + l), b = U8x8(ql + 32 + l);
          const __m256i c = U8x8(qh + l);
          q[0][t] = ToF(_mm256_sub_epi32(
              _mm256_or_si256(_mm256_and_si256(a, low),
                              _mm256_and_si256(_mm256_slli_epi32(c, 4), two)),
              off));
          q[1][t] = ToF(_mm256_sub_epi32(
              _mm256_or_si256(_mm256_and_si256(b, low),
                              _mm256_and_si256(_mm256_slli_epi32(c, 2), two)),
              off));
          q[2][t] = ToF(_mm256_sub_epi32(
              _mm256_or_si256(_mm256_srli_epi32(a, 4), _mm256_and_si256(c, two)),
              off));
          q[3][t] = ToF(_mm256_sub_epi32(
              _mm256_or_si256(_mm256_srli_epi32(b, 4),
                              _mm256_and_si256(_mm256_srli_epi32(c, 2), two)),
              off));
        }
        __m256 s[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          s[r] = _mm256_set1_ps(d * static_cast<float>(sc[g / 16 + 2 * r]));
        }
#pragma GCC unroll 4
        for (int i = 0; i < M; ++i) {
          const float* xp = x[i] + 256 * sb + 128 * h + g;
#pragma GCC unroll 4
          for (int r = 0; r < 4; ++r) {
            acc[i] = _mm256_fmadd_ps(Dot<2>(q[r], xp + 32 * r), s[r], acc[i]);
          }
        }
      }
    }
  }
  for (int i = 0; i < M; ++i) out[i] = HSum(acc[i]);
}

template <int M>
void RowF16(const uint8_t* w, int64_t k, const float* const* x,
            const float* const*, float* out) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(w);
  __m256 acc0[M], acc1[M];
  for (int i = 0; i < M; ++i) {
    acc0[i] = _mm256_setzero_ps();
    acc1[i] = _mm256_setzero_ps();
  }
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    const __m256 w0 = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + p)));
    const __m256 w1 = _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + p + 8)));
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      acc0[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[i] + p), acc0[i]);
      acc1[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[i] + p + 8), acc1[i]);
    }
  }
  for (int i = 0; i < M; ++i) out[i] = HSum(_mm256_add_ps(acc0[i], acc1[i]));
  for (; p < k; ++p) {
    const float wf = _cvtsh_ss(h[p]);
    for (int i = 0; i < M; ++i) out[i] += wf * x[i][p];
  }
}

template <int M>
void RowsOfM(const QuantGemmArgs& g, int64_t m0, int64_t n_begin,
             int64_t n_end) {
  const float* x[M];
  const float* xs[M];
  const int64_t blocks32 = g.k / 32;
  for (int i = 0; i < M; ++i) {
    x[i] = g.x + (m0 + i) * g.ldx;
    xs[i] = g.xsum != nullptr ? g.xsum + (m0 + i) * blocks32 : nullptr;
  }
  for (int64_t n = n_begin; n < n_end; ++n) {
    const uint8_t* w = g.w + n * g.row_bytes;
    float out[M];
    switch (g.dtype) {
      case DType::kQ8_0: RowQ8_0<M>(w, g.k, x, xs, out); break;
      case DType::kQ4_0: RowQ4<M, true>(w, g.k, x, xs, out); break;
      case DType::kQ4_1: RowQ4<M, false>(w, g.k, x, xs, out); break;
      case DType::kQ4_K: RowQ4_K<M>(w, g.k, x, xs, out); break;
      case DType::kQ6_K: RowQ6_K<M>(w, g.k, x, xs, out); break;
      default: RowF16<M>(w, g.k, x, xs, out); break;
    }
    const float b = g.bias != nullptr ? g.bias[n] : 0.0f;
    for (int i = 0; i < M; ++i) g.y[(m0 + i) * g.ldy + n] = out[i] + b;
  }
}

void QuantGemmRowsImpl(const QuantGemmArgs& g, int64_t n_begin,
                       int64_t n_end) {
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kWeightRowBlock) {
    const int64_t n1 = n_end - n0 < kWeightRowBlock ? n_end : n0 + kWeightRowBlock;
    for (int64_t m0 = 0; m0 < g.m; m0 += kRowsPerPass) {
      switch (g.m - m0 < kRowsPerPass ? g.m - m0 : kRowsPerPass) {
        case 1: RowsOfM<1>(g, m0, n0, n1); break;
        case 2: RowsOfM<2>(g, m0, n0, n1); break;
        case 3: RowsOfM<3>(g, m0, n0, n1); break;
        default: RowsOfM<4>(g, m0, n0, n1); break;
      }
    }
  }
}
