// Branch-free float approximations of exp/erf/tanh written so the compiler
// can vectorize loops that call them. Internal linkage (static) so that ISA-
// specific translation units never share an out-of-line copy. Max errors (vs double): exp 2 ulp in
// [-87, 88] (flushes below to ~1e-38), erf 2e-7 absolute, tanh 2e-7 absolute.
#ifndef INFERD_DEVICE_CPU_FAST_MATH_H_
#define INFERD_DEVICE_CPU_FAST_MATH_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace inferd {
namespace cpu {

static inline float FastExp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  // Cody-Waite range reduction: r = x - n ln2, |r| <= ln2 / 2.
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// Abramowitz & Stegun 7.1.26 on |x|, sign restored.
static inline float FastErf(float x) {
  const float ax = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float y = 1.0f - p * t * FastExp(-ax * ax);
  return std::copysign(y, x);
}

static inline float FastTanh(float x) {
  const float ax = std::fabs(x);
  // tanh(|x|) = 1 - 2 / (exp(2|x|) + 1); for tiny |x| use x (cubic term is
  // below float resolution).
  const float e = FastExp(2.0f * ax);
  float y = 1.0f - 2.0f / (e + 1.0f);
  y = ax < 1e-3f ? ax - ax * ax * ax / 3.0f : y;
  return std::copysign(y, x);
}

static inline float FastSigmoid(float x) { return 1.0f / (1.0f + FastExp(-x)); }

}  // namespace cpu
}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_FAST_MATH_H_
