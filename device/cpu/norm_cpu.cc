// LayerNorm / RMSNorm (optionally fused with the residual add) on the CPU:
// rows over the thread pool, float partial sums in 16 lanes.
#include <algorithm>
#include <cmath>
#include <functional>

#include "device/cpu/kernels.h"
#include "device/internal/check.h"

namespace inferd {
namespace cpu {
namespace {

using device_internal::IsEmpty;
using device_internal::Row;

constexpr int kLanes = 16;

float Sum(const float* v, int64_t n) {
  float part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) part[l] += v[j + l];
  }
  float s = 0.0f;
  for (; j < n; ++j) s += v[j];
  for (int l = 0; l < kLanes; ++l) s += part[l];
  return s;
}

float SumSquaredDiff(const float* v, int64_t n, float mean) {
  float part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float d = v[j + l] - mean;
      part[l] += d * d;
    }
  }
  float s = 0.0f;
  for (; j < n; ++j) s += (v[j] - mean) * (v[j] - mean);
  for (int l = 0; l < kLanes; ++l) s += part[l];
  return s;
}

// Returns the row to normalize: x itself, or residual after residual += x.
const float* PrepareRow(const TensorView& x, const TensorView& residual,
                        int64_t r) {
  const float* xr = Row<const float>(x, r);
  if (IsEmpty(residual)) return xr;
  float* rr = Row<float>(residual, r);
  for (int64_t j = 0; j < x.shape[1]; ++j) rr[j] += xr[j];
  return rr;
}

void ForRows(ThreadPool* pool, int64_t rows, int64_t width,
             const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t min_rows = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, width));
  if (pool == nullptr || rows <= min_rows) {
    fn(0, rows);
    return;
  }
  pool->ParallelFor(rows, fn, min_rows);
}

}  // namespace

absl::Status LayerNorm(const KernelContext& ctx, const TensorView& x,
                       const TensorView& residual, const TensorView& weight,
                       const TensorView& bias, float eps,
                       const TensorView& out) {
  const int64_t h = x.shape[1];
  const float* w = weight.as<const float>();
  const float* b = bias.as<const float>();
  ForRows(ctx.pool, x.shape[0], h, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* v = PrepareRow(x, residual, r);
      const float mean = Sum(v, h) / static_cast<float>(h);
      const float var = SumSquaredDiff(v, h, mean) / static_cast<float>(h);
      const float inv = 1.0f / std::sqrt(var + eps);
      float* o = Row<float>(out, r);
      if (b != nullptr) {
        for (int64_t j = 0; j < h; ++j) o[j] = (v[j] - mean) * inv * w[j] + b[j];
      } else {
        for (int64_t j = 0; j < h; ++j) o[j] = (v[j] - mean) * inv * w[j];
      }
    }
  });
  return absl::OkStatus();
}

absl::Status RmsNorm(const KernelContext& ctx, const TensorView& x,
                     const TensorView& residual, const TensorView& weight,
                     float eps, const TensorView& out) {
  const int64_t h = x.shape[1];
  const float* w = weight.as<const float>();
  ForRows(ctx.pool, x.shape[0], h, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* v = PrepareRow(x, residual, r);
      const float ms = SumSquaredDiff(v, h, 0.0f) / static_cast<float>(h);
      const float inv = 1.0f / std::sqrt(ms + eps);
      float* o = Row<float>(out, r);
      for (int64_t j = 0; j < h; ++j) o[j] = v[j] * inv * w[j];
    }
  });
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace inferd
