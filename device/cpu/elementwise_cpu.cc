// Elementwise CPU kernels (embedding gather, conversion, add, activations,
// gated activations, softmax): rows split over the thread pool, inner loops
// vectorizable (fast_math.h); activations and softmax use the AVX-512 /
// AVX2 row kernels (elementwise.h) when the CPU has them.
#include <algorithm>
#include <vector>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "device/bf16.h"
#include "device/cpu/cpu_features.h"
#include "device/cpu/elementwise.h"
#include "device/cpu/fast_math.h"
#include "device/cpu/kernels.h"
#include "device/internal/check.h"
#include "device/quant.h"

namespace inferd {
namespace cpu {
namespace {

using device_internal::Row;

// Runs fn(row_begin, row_end) over `rows` rows of `width` elements, in chunks
// of roughly 16K elements.
void ForRows(ThreadPool* pool, int64_t rows, int64_t width,
             const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t min_rows =
      std::max<int64_t>(1, 16384 / std::max<int64_t>(1, width));
  if (pool == nullptr || rows <= min_rows) {
    fn(0, rows);
    return;
  }
  pool->ParallelFor(rows, fn, min_rows);
}

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kInvSqrt2 = 0.70710678118654752440f;

template <Activation kAct>
inline float Act(float x) {
  if constexpr (kAct == Activation::kSilu) {
    return x * FastSigmoid(x);
  } else if constexpr (kAct == Activation::kGeluErf) {
    return 0.5f * x * (1.0f + FastErf(x * kInvSqrt2));
  } else if constexpr (kAct == Activation::kGeluTanh) {
    return 0.5f * x *
           (1.0f + FastTanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  } else if constexpr (kAct == Activation::kRelu) {
    return x > 0.0f ? x : 0.0f;
  } else {
    return FastTanh(x);
  }
}

template <Activation kAct>
void ActRow(const float* x, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = Act<kAct>(x[j]);
}

template <Activation kAct>
void GatedRow(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = Act<kAct>(gate[j]) * up[j];
}

using ActRowFn = void (*)(const float*, float*, int64_t);
using GatedRowFn = void (*)(const float*, const float*, float*, int64_t);

// The widest row-kernel table the active ISA allows; nullptr = portable.
const VecRowKernels* VecKernels() {
  const CpuIsa isa = ActiveCpuIsa();
  if (isa >= CpuIsa::kAvx512) return &cpu_avx512::RowKernels();
  if (isa >= CpuIsa::kAvx2) return &cpu_avx2::RowKernels();
  return nullptr;
}

bool ValidActivation(Activation act) {
  const int i = static_cast<int>(act);
  return i >= 0 && i < VecRowKernels::kNumActivations;
}

void SoftmaxRow(const float* xr, float* o, int64_t w) {
  float mx = xr[0];
  for (int64_t j = 1; j < w; ++j) mx = std::max(mx, xr[j]);
  float sum = 0.0f;
  for (int64_t j = 0; j < w; ++j) {
    o[j] = FastExp(xr[j] - mx);
    sum += o[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < w; ++j) o[j] *= inv;
}

ActRowFn PickAct(Activation act) {
  const VecRowKernels* vec = VecKernels();
  if (vec != nullptr && ValidActivation(act)) {
    return vec->act[static_cast<int>(act)];
  }
  switch (act) {
    case Activation::kSilu:
      return &ActRow<Activation::kSilu>;
    case Activation::kGeluErf:
      return &ActRow<Activation::kGeluErf>;
    case Activation::kGeluTanh:
      return &ActRow<Activation::kGeluTanh>;
    case Activation::kRelu:
      return &ActRow<Activation::kRelu>;
    case Activation::kTanh:
      return &ActRow<Activation::kTanh>;
  }
  return nullptr;
}

GatedRowFn PickGated(Activation act) {
  const VecRowKernels* vec = VecKernels();
  if (vec != nullptr && ValidActivation(act)) {
    return vec->gated[static_cast<int>(act)];
  }
  switch (act) {
    case Activation::kSilu:
      return &GatedRow<Activation::kSilu>;
    case Activation::kGeluErf:
      return &GatedRow<Activation::kGeluErf>;
    case Activation::kGeluTanh:
      return &GatedRow<Activation::kGeluTanh>;
    case Activation::kRelu:
      return &GatedRow<Activation::kRelu>;
    case Activation::kTanh:
      return &GatedRow<Activation::kTanh>;
  }
  return nullptr;
}

void Bf16RowToF32(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t bits = static_cast<uint32_t>(src[j]) << 16;
    std::memcpy(&dst[j], &bits, 4);
  }
}

}  // namespace

absl::Status MeanPool(const KernelContext& ctx, const TensorView& x,
                      const TensorView& starts, const TensorView& ends,
                      const TensorView& out) {
  const int64_t rows = x.shape[0], h = x.shape[1];
  const int32_t* b = starts.as<const int32_t>();
  const int32_t* e = ends.as<const int32_t>();
  const int64_t seqs = starts.shape[0];
  for (int64_t s = 0; s < seqs; ++s) {
    if (b[s] < 0 || b[s] >= e[s] || e[s] > rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MeanPool: rows [", b[s], ", ", e[s], ") of sequence ", s,
          " are not a non-empty range within [0, ", rows, ")"));
    }
  }
  // Each column sums its rows in order in double, as the reference does, so
  // the bits do not depend on the split across threads.
  ForRows(ctx.pool, seqs, h * 8, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(h));
    for (int64_t s = begin; s < end; ++s) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int32_t r = b[s]; r < e[s]; ++r) {
        const float* row = Row<const float>(x, r);
        for (int64_t j = 0; j < h; ++j) acc[j] += row[j];
      }
      const double inv = 1.0 / (e[s] - b[s]);
      float* dst = Row<float>(out, s);
      for (int64_t j = 0; j < h; ++j) dst[j] = static_cast<float>(acc[j] * inv);
    }
  });
  return absl::OkStatus();
}

// The output heads run row by row in double (device/ops.h): a row's bits
// do not depend on the split across threads. A row is read into a double
// copy first, so `out` may alias `x`.
absl::Status L2Normalize(const KernelContext& ctx, const TensorView& x,
                         const TensorView& out) {
  const int64_t h = x.shape[1];
  ForRows(ctx.pool, x.shape[0], h * 4, [&](int64_t begin, int64_t end) {
    std::vector<double> v(static_cast<size_t>(h));
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = Row<const float>(x, r);
      double sum = 0.0;
      for (int64_t j = 0; j < h; ++j) {
        v[j] = xr[j];
        sum += v[j] * v[j];
      }
      const double scale = 1.0 / std::max(std::sqrt(sum), 1e-12);
      float* o = Row<float>(out, r);
      for (int64_t j = 0; j < h; ++j) o[j] = static_cast<float>(v[j] * scale);
    }
  });
  return absl::OkStatus();
}

absl::Status Scores(const KernelContext& ctx, ScoreMode mode,
                    const TensorView& x, const TensorView& out) {
  const int64_t n = x.shape[1];
  ForRows(ctx.pool, x.shape[0], n * 16, [&](int64_t begin, int64_t end) {
    std::vector<double> e(static_cast<size_t>(n));
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = Row<const float>(x, r);
      float* o = Row<float>(out, r);
      if (mode == ScoreMode::kSigmoid) {
        for (int64_t j = 0; j < n; ++j) {
          o[j] = static_cast<float>(1.0 / (1.0 + std::exp(-double{xr[j]})));
        }
        continue;
      }
      double mx = -INFINITY;
      for (int64_t j = 0; j < n; ++j) mx = std::max<double>(mx, xr[j]);
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j) {
        e[j] = std::exp(xr[j] - mx);
        sum += e[j];
      }
      for (int64_t j = 0; j < n; ++j) o[j] = static_cast<float>(e[j] / sum);
    }
  });
  return absl::OkStatus();
}

absl::Status Embedding(const KernelContext& ctx, const TensorView& table,
                       const TensorView& ids, const TensorView& out) {
  const int64_t vocab = table.shape[0], h = table.shape[1];
  const int32_t* id = ids.as<const int32_t>();
  for (int64_t t = 0; t < ids.shape[0]; ++t) {
    if (id[t] < 0 || id[t] >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("Embedding: id ", id[t], " outside [0, ", vocab, ")"));
    }
  }
  ForRows(ctx.pool, ids.shape[0], h, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* dst = Row<float>(out, t);
      if (table.dtype == DType::kF32) {
        std::memcpy(dst, table.as<const float>() + id[t] * h,
                    h * sizeof(float));
      } else if (table.dtype == DType::kBF16) {
        Bf16RowToF32(table.as<const uint16_t>() + id[t] * h, dst, h);
      } else {  // F16 or block-quantized (h validated by ops.cc)
        DequantizeRow(table.dtype,
                      static_cast<const uint8_t*>(table.data) +
                          id[t] * DTypeRowBytes(table.dtype, h),
                      h, dst)
            .IgnoreError();
      }
    }
  });
  return absl::OkStatus();
}

absl::Status Convert(const KernelContext& ctx, const TensorView& src,
                     const TensorView& dst) {
  const int64_t w = src.shape[1];
  ForRows(ctx.pool, src.shape[0], w, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const char* s = static_cast<const char*>(src.data) +
                      r * src.strides[0] * DTypeSize(src.dtype);
      char* d = static_cast<char*>(dst.data) +
                r * dst.strides[0] * DTypeSize(dst.dtype);
      if (src.dtype == dst.dtype) {
        std::memcpy(d, s, w * DTypeSize(src.dtype));
        continue;
      }
      const auto* s16 = reinterpret_cast<const uint16_t*>(s);
      const auto* s32 = reinterpret_cast<const float*>(s);
      auto* d16 = reinterpret_cast<uint16_t*>(d);
      auto* d32 = reinterpret_cast<float*>(d);
      for (int64_t j = 0; j < w; ++j) {
        float v = src.dtype == DType::kF32    ? s32[j]
                  : src.dtype == DType::kBF16 ? Bf16ToFloat(s16[j])
                                              : F16ToFloat(s16[j]);
        if (dst.dtype == DType::kF32) {
          d32[j] = v;
        } else if (dst.dtype == DType::kBF16) {
          d16[j] = FloatToBf16(v);
        } else {
          d16[j] = FloatToF16(v);
        }
      }
    }
  });
  return absl::OkStatus();
}

absl::Status Add(const KernelContext& ctx, const TensorView& a,
                 const TensorView& b, const TensorView& out) {
  const int64_t w = a.shape[1];
  ForRows(ctx.pool, a.shape[0], w, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* ar = Row<const float>(a, r);
      const float* br = Row<const float>(b, r);
      float* o = Row<float>(out, r);
      for (int64_t j = 0; j < w; ++j) o[j] = ar[j] + br[j];
    }
  });
  return absl::OkStatus();
}

absl::Status Activate(const KernelContext& ctx, Activation act,
                      const TensorView& x, const TensorView& out) {
  const ActRowFn fn = PickAct(act);
  if (fn == nullptr) return absl::InvalidArgumentError("unknown activation");
  const int64_t w = x.shape[1];
  ForRows(ctx.pool, x.shape[0], w, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      fn(Row<const float>(x, r), Row<float>(out, r), w);
  });
  return absl::OkStatus();
}

absl::Status GatedActivate(const KernelContext& ctx, Activation act,
                           const TensorView& gate, const TensorView& up,
                           const TensorView& out) {
  const GatedRowFn fn = PickGated(act);
  if (fn == nullptr) return absl::InvalidArgumentError("unknown activation");
  const int64_t w = gate.shape[1];
  ForRows(ctx.pool, gate.shape[0], w, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      fn(Row<const float>(gate, r), Row<const float>(up, r), Row<float>(out, r),
         w);
    }
  });
  return absl::OkStatus();
}

absl::Status Softmax(const KernelContext& ctx, const TensorView& x,
                     const TensorView& out) {
  const int64_t w = x.shape[1];
  const VecRowKernels* vec = VecKernels();
  const ActRowFn row_fn = vec != nullptr ? vec->softmax : &SoftmaxRow;
  ForRows(ctx.pool, x.shape[0], w, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      row_fn(Row<const float>(x, r), Row<float>(out, r), w);
    }
  });
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace inferd
