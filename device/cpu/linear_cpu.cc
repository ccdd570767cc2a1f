// Linear and MatMul on the CPU: picks the GEMM build for the active ISA
// (AVX-512, with vdpbf16ps for BF16 weights where Bf16DotInUse(); AVX2;
// portable) at run time.
#include <cstring>

#include "device/cpu/cpu_features.h"
#include "device/cpu/gemm.h"
#include "device/cpu/kernels.h"
#include "device/cpu/quant_gemm.h"

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

const void* PackedPanels(const TensorView& w, uint32_t format) {
  if (w.packed == nullptr) return nullptr;
  PackedLinearHeader h;
  std::memcpy(&h, w.packed, sizeof(h));
  if (h.magic != kPackedLinearMagic ||
      static_cast<uint32_t>(h.format) != format || h.dtype != w.dtype ||
      h.n != w.shape[0] || h.k != w.shape[1]) {
    return nullptr;
  }
  return static_cast<const uint8_t*>(w.packed) + kPackedHeaderBytes;
}

absl::StatusOr<DeviceBuffer> PackLinear(const KernelContext& ctx,
                                        const TensorView& w) {
  PackedLinearHeader h;
  h.magic = kPackedLinearMagic;
  h.dtype = w.dtype;
  h.n = w.shape[0];
  h.k = w.shape[1];
  const CpuIsa isa = ActiveCpuIsa();
  size_t bytes = 0;
  if (ctx.activations == ActivationPrecision::kInt8 && isa >= CpuIsa::kAvx512Bf16 &&
      cpu_avx512::Int8PanelsSupport(w.dtype, h.k)) {
    // The int8 policy's layout: every M reads it (QuantLinear).
    h.format = PackedFormat::kInt8Panels;
    bytes = static_cast<size_t>(cpu_avx512::Int8PanelsBytes(w.dtype, h.n, h.k));
  } else if (w.dtype == DType::kF32 && isa >= CpuIsa::kAvx512) {
    h.format = PackedFormat::kF32Panels;
    bytes = static_cast<size_t>(cpu_avx512::PackedF32Floats(h.n, h.k)) * 4;
  } else if (w.dtype == DType::kBF16 && isa >= CpuIsa::kAvx512Bf16 && Bf16DotInUse()) {
    // vdpbf16ps reads K pairs of 32 columns; the GEMV (M = 1) keeps
    // reading the stored rows.
    h.format = PackedFormat::kBf16Pairs;
    bytes = static_cast<size_t>(cpu_avx512::PackedBf16PairWords(h.n, h.k)) * 4;
  } else if (IsBlockQuantized(w.dtype) && isa >= CpuIsa::kAvx512Bf16 &&
             cpu_avx512::QuantVnniSupports(w.dtype)) {
    h.format = PackedFormat::kVnniPanels;
    bytes = static_cast<size_t>(
        cpu_avx512::VnniPackedBytes(w.dtype, h.n, h.k));
  } else {
    return DeviceBuffer();
  }
  absl::StatusOr<DeviceBuffer> buf =
      DeviceBuffer::Create(ctx.device, kPackedHeaderBytes + bytes, 64);
  if (!buf.ok()) return buf.status();
  std::memcpy(buf->data(), &h, sizeof(h));
  uint8_t* out = buf->as<uint8_t>() + kPackedHeaderBytes;
  if (h.format == PackedFormat::kF32Panels || h.format == PackedFormat::kBf16Pairs) {
    GemmArgs g;
    g.w = w.data;
    g.ldw = h.k;
    g.n = h.n;
    g.k = h.k;
    if (h.format == PackedFormat::kF32Panels) {
      cpu_avx512::PackF32Panels(ctx.pool, g, reinterpret_cast<float*>(out));
    } else {
      cpu_avx512::PackBf16Pairs(ctx.pool, g, reinterpret_cast<uint32_t*>(out));
    }
  } else {
    QuantGemmArgs g;
    g.dtype = w.dtype;
    g.w = static_cast<const uint8_t*>(w.data);
    g.row_bytes = DTypeRowBytes(w.dtype, h.k);
    g.n = h.n;
    g.k = h.k;
    if (h.format == PackedFormat::kInt8Panels) {
      cpu_avx512::PackInt8Panels(ctx.pool, g, out);
    } else {
      cpu_avx512::PackVnniWeights(ctx.pool, g, out);
    }
  }
  return buf;
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
  // The panels are the AVX-512 kernel's (32 columns wide).
  if (ActiveCpuIsa() >= CpuIsa::kAvx512) {
    g.packed = static_cast<const float*>(
        PackedPanels(w, static_cast<uint32_t>(PackedFormat::kF32Panels)));
    if (Bf16DotInUse()) {
      g.packed_pairs = static_cast<const uint32_t*>(
          PackedPanels(w, static_cast<uint32_t>(PackedFormat::kBf16Pairs)));
    }
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
