// AVX2 + FMA build of the activation and softmax row kernels
// (vec_math_impl.h); called only when the CPU supports AVX2 and FMA.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "device/cpu/elementwise.h"
#include "device/ops.h"

namespace inferd {
namespace cpu_avx2 {
namespace {

using VF = __m256;
constexpr int kW = 8;

inline VF Load(const float* p) { return _mm256_loadu_ps(p); }
inline void Store(float* p, VF v) { _mm256_storeu_ps(p, v); }
inline VF Set1(float f) { return _mm256_set1_ps(f); }
inline VF Add(VF a, VF b) { return _mm256_add_ps(a, b); }
inline VF Sub(VF a, VF b) { return _mm256_sub_ps(a, b); }
inline VF Mul(VF a, VF b) { return _mm256_mul_ps(a, b); }
inline VF Div(VF a, VF b) { return _mm256_div_ps(a, b); }
// 12-bit estimate and one Newton step (r (2 - d r)).
inline VF Recip(VF d) {
  const VF r = _mm256_rcp_ps(d);
  return _mm256_mul_ps(r, _mm256_fnmadd_ps(d, r, _mm256_set1_ps(2.0f)));
}
inline VF Min(VF a, VF b) { return _mm256_min_ps(a, b); }
inline VF Max(VF a, VF b) { return _mm256_max_ps(a, b); }
inline VF Fma(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
inline VF Abs(VF a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
inline VF CopySign(VF mag, VF sign) {
  const VF s = _mm256_and_ps(sign, _mm256_set1_ps(-0.0f));
  return _mm256_or_ps(Abs(mag), s);
}
inline VF Round(VF a) {
  return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline VF Select(VF a, VF b, VF t, VF f) {
  return _mm256_blendv_ps(f, t, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
}
inline VF Pow2i(VF n) {
  const __m256i e =
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}
inline VF MulPow2i(VF p, VF n) { return Mul(p, Pow2i(n)); }
inline float ReduceMax(VF v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}
inline float ReduceAdd(VF v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

#include "device/cpu/vec_math_impl.h"

}  // namespace

const VecRowKernels& RowKernels() {
  static const VecRowKernels k = {
      {&ActRowVec<Activation::kSilu>, &ActRowVec<Activation::kGeluErf>,
       &ActRowVec<Activation::kGeluTanh>, &ActRowVec<Activation::kRelu>,
       &ActRowVec<Activation::kTanh>},
      {&GatedRowVec<Activation::kSilu>, &GatedRowVec<Activation::kGeluErf>,
       &GatedRowVec<Activation::kGeluTanh>, &GatedRowVec<Activation::kRelu>,
       &GatedRowVec<Activation::kTanh>},
      &SoftmaxRowVec};
  return k;
}

}  // namespace cpu_avx2
}  // namespace inferd
