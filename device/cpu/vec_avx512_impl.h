// AVX-512 definitions of the SIMD abstraction used by vec_math_impl.h.
// Included inside an AVX-512 translation unit's anonymous namespace, before
// vec_math_impl.h; needs <immintrin.h>.

using VF = __m512;
constexpr int kW = 16;

inline VF Load(const float* p) { return _mm512_loadu_ps(p); }
inline void Store(float* p, VF v) { _mm512_storeu_ps(p, v); }
inline VF Set1(float f) { return _mm512_set1_ps(f); }
inline VF Add(VF a, VF b) { return _mm512_add_ps(a, b); }
inline VF Sub(VF a, VF b) { return _mm512_sub_ps(a, b); }
inline VF Mul(VF a, VF b) { return _mm512_mul_ps(a, b); }
inline VF Div(VF a, VF b) { return _mm512_div_ps(a, b); }
// 14-bit estimate and one Newton step (r (2 - d r)).
inline VF Recip(VF d) {
  const VF r = _mm512_rcp14_ps(d);
  return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
}
inline VF Min(VF a, VF b) { return _mm512_min_ps(a, b); }
inline VF Max(VF a, VF b) { return _mm512_max_ps(a, b); }
inline VF Fma(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
inline VF Abs(VF a) { return _mm512_abs_ps(a); }
inline VF CopySign(VF mag, VF sign) {
  const __m512i s =
      _mm512_and_si512(_mm512_castps_si512(sign), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_castps_si512(_mm512_abs_ps(mag)), s));
}
inline VF Round(VF a) {
  return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline VF Select(VF a, VF b, VF t, VF f) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), f, t);
}
// p 2^n for integral n (vscalefps: one instruction for the cvt, add,
// shift and multiply of the exponent-field construction).
inline VF MulPow2i(VF p, VF n) { return _mm512_scalef_ps(p, n); }
inline float ReduceMax(VF v) { return _mm512_reduce_max_ps(v); }
inline float ReduceAdd(VF v) { return _mm512_reduce_add_ps(v); }
