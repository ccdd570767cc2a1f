// Rotary embedding application on the CPU (neox and gpt-j pairings).
#include <algorithm>

#include "device/cpu/kernels.h"
#include "device/internal/check.h"

namespace inferd {
namespace cpu {
namespace {

using device_internal::IsEmpty;
using device_internal::Row;

void RotateRow(float* row, int64_t heads, int head_dim, const float* c,
               const float* s, int64_t half, RopeStyle style) {
  for (int64_t h = 0; h < heads; ++h) {
    float* v = row + h * head_dim;
    if (style == RopeStyle::kNeox) {
      float* a = v;
      float* b = v + half;
      for (int64_t i = 0; i < half; ++i) {
        const float x0 = a[i], x1 = b[i];
        a[i] = x0 * c[i] - x1 * s[i];
        b[i] = x1 * c[i] + x0 * s[i];
      }
    } else {
      for (int64_t i = 0; i < half; ++i) {
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c[i] - x1 * s[i];
        v[2 * i + 1] = x1 * c[i] + x0 * s[i];
      }
    }
  }
}

}  // namespace

absl::Status ApplyRotary(const KernelContext& ctx, const TensorView& q,
                         const TensorView& k, const TensorView& cos_sin,
                         int head_dim, RopeStyle style) {
  const int64_t half = cos_sin.shape[1] / 2;
  const int64_t q_heads = q.shape[1] / head_dim;
  const int64_t k_heads = IsEmpty(k) ? 0 : k.shape[1] / head_dim;
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* c = Row<const float>(cos_sin, t);
      RotateRow(Row<float>(q, t), q_heads, head_dim, c, c + half, half, style);
      if (k_heads > 0) {
        RotateRow(Row<float>(k, t), k_heads, head_dim, c, c + half, half, style);
      }
    }
  };
  const int64_t min_rows =
      std::max<int64_t>(1, 8192 / std::max<int64_t>(1, q.shape[1]));
  if (ctx.pool == nullptr || q.shape[0] <= min_rows) {
    body(0, q.shape[0]);
  } else {
    ctx.pool->ParallelFor(q.shape[0], body, min_rows);
  }
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace inferd
