#include "device/int8.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace inferd {

void QuantizeWeightRowsInt8(const float* w, int64_t rows, int64_t cols,
                            int8_t* q, float* scale) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(row[c]));
    const float s = amax > 0.0f ? amax / 127.0f : 1.0f;
    const float inv = 1.0f / s;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = std::nearbyint(row[c] * inv);
      q[r * cols + c] =
          static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, v)));
    }
    scale[r] = s;
  }
}

void QuantizeActivationRowU8(const float* x, int64_t n, uint8_t* u,
                             float* scale, int32_t* zero_point) {
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const float s = hi > lo ? (hi - lo) / 255.0f : 1.0f;
  const float inv = 1.0f / s;
  const float z = std::min(255.0f, std::max(0.0f, std::nearbyint(-lo * inv)));
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::nearbyint(x[i] * inv) + z;
    u[i] = static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, v)));
  }
  *scale = s;
  *zero_point = static_cast<int32_t>(z);
}

void ReferenceLinearInt8(const float* x, int64_t ldx, const int8_t* q,
                         const float* scale, const float* bias, int64_t m,
                         int64_t n, int64_t k, float* y, int64_t ldy) {
  std::vector<int64_t> wsum(static_cast<size_t>(n), 0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) wsum[j] += q[j * k + p];
  }
  std::vector<uint8_t> u(static_cast<size_t>(k));
  for (int64_t i = 0; i < m; ++i) {
    float s = 1.0f;
    int32_t z = 0;
    QuantizeActivationRowU8(x + i * ldx, k, u.data(), &s, &z);
    for (int64_t j = 0; j < n; ++j) {
      int64_t acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        acc += static_cast<int64_t>(u[p]) * q[j * k + p];
      }
      acc -= static_cast<int64_t>(z) * wsum[j];
      y[i * ldy + j] = static_cast<float>(acc) * (s * scale[j]) +
                       (bias != nullptr ? bias[j] : 0.0f);
    }
  }
}

}  // namespace inferd
