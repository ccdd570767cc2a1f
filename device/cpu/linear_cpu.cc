// Linear and MatMul on the CPU: picks the GEMM build for the active ISA
// (AVX-512, with vdpbf16ps for BF16 weights where Bf16DotInUse(); AVX2;
// portable) at run time.
#include "device/cpu/cpu_features.h"
#include "device/cpu/gemm.h"
#include "device/cpu/kernels.h"

namespace inferd {
namespace cpu {

void RunGemm(ThreadPool* pool, const GemmArgs& g) {
  const CpuIsa isa = ActiveCpuIsa();
  if (isa >= CpuIsa::kAvx512) {
    cpu_avx512::Gemm(pool, g, Bf16DotInUse());
  } else if (isa >= CpuIsa::kAvx2) {
    cpu_avx2::Gemm(pool, g);
  } else {
    cpu_scalar::Gemm(pool, g);
  }
}

absl::Status Linear(const KernelContext& ctx, const TensorView& x,
                    const TensorView& w, const TensorView& bias,
                    const TensorView& y) {
  if (w.dtype != DType::kF32 && w.dtype != DType::kBF16) {
    return QuantLinear(ctx, x, w, bias, y);
  }
  GemmArgs g;
  g.x = x.as<const float>();
  g.ldx = x.shape[0] > 1 ? x.strides[0] : x.shape[1];
  g.w = w.data;
  g.w_bf16 = w.dtype == DType::kBF16;
  g.w_layout_nk = true;
  g.ldw = w.shape[1];
  g.bias = bias.as<const float>();
  g.y = y.as<float>();
  g.ldy = y.shape[0] > 1 ? y.strides[0] : y.shape[1];
  g.m = x.shape[0];
  g.n = w.shape[0];
  g.k = x.shape[1];
  if (g.k == 0) {
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        g.y[i * g.ldy + j] = g.bias != nullptr ? g.bias[j] : 0.0f;
      }
    }
    return absl::OkStatus();
  }
  RunGemm(ctx.pool, g);
  return absl::OkStatus();
}

absl::Status MatMul(const KernelContext& ctx, const TensorView& a,
                    const TensorView& b, bool transpose_b,
                    const TensorView& c) {
  GemmArgs g;
  g.x = a.as<const float>();
  g.ldx = a.shape[0] > 1 ? a.strides[0] : a.shape[1];
  g.w = b.data;
  g.w_bf16 = false;
  g.w_layout_nk = transpose_b;
  g.ldw = b.shape[0] > 1 ? b.strides[0] : b.shape[1];
  g.y = c.as<float>();
  g.ldy = c.shape[0] > 1 ? c.strides[0] : c.shape[1];
  g.m = a.shape[0];
  g.n = c.shape[1];
  g.k = a.shape[1];
  if (g.k == 0) {
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) g.y[i * g.ldy + j] = 0.0f;
    }
    return absl::OkStatus();
  }
  RunGemm(ctx.pool, g);
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace inferd
