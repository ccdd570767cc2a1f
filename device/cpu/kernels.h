// Optimized CPU kernels behind CpuOpTable() (one group per *_cpu.cc file).
// Same contracts as the OpTable entries; thread-safe.
#ifndef INFERD_DEVICE_CPU_KERNELS_H_
#define INFERD_DEVICE_CPU_KERNELS_H_

#include "device/cpu/gemm.h"
#include "device/op_table.h"

namespace inferd {
namespace cpu {

// GEMM for the active ISA.
void RunGemm(ThreadPool* pool, const GemmArgs& args);

// linear_cpu.cc
absl::Status Linear(const KernelContext& ctx, const TensorView& x,
                    const TensorView& w, const TensorView& bias,
                    const TensorView& y);
// A copy of w in the panel layout of the GEMM this CPU runs (see
// PackLinearWeight in device/ops.h); empty when there is none.
absl::StatusOr<DeviceBuffer> PackLinear(const KernelContext& ctx,
                                        const TensorView& w);
// The panels of w.packed when it holds `format` for w's dtype and shape
// (from PackLinear), else nullptr.
const void* PackedPanels(const TensorView& w, uint32_t format);
absl::Status MatMul(const KernelContext& ctx, const TensorView& a,
                    const TensorView& b, bool transpose_b,
                    const TensorView& c);

// quant_linear_cpu.cc: Linear with F16 or block-quantized weights.
absl::Status QuantLinear(const KernelContext& ctx, const TensorView& x,
                         const TensorView& w, const TensorView& bias,
                         const TensorView& y);

// elementwise_cpu.cc
absl::Status Embedding(const KernelContext& ctx, const TensorView& table,
                       const TensorView& ids, const TensorView& out);
absl::Status Convert(const KernelContext& ctx, const TensorView& src,
                     const TensorView& dst);
absl::Status Add(const KernelContext& ctx, const TensorView& a,
                 const TensorView& b, const TensorView& out);
absl::Status Activate(const KernelContext& ctx, Activation act,
                      const TensorView& x, const TensorView& out);
absl::Status GatedActivate(const KernelContext& ctx, Activation act,
                           const TensorView& gate, const TensorView& up,
                           const TensorView& out);
absl::Status Softmax(const KernelContext& ctx, const TensorView& x,
                     const TensorView& out);

// norm_cpu.cc
absl::Status LayerNorm(const KernelContext& ctx, const TensorView& x,
                       const TensorView& residual, const TensorView& weight,
                       const TensorView& bias, float eps,
                       const TensorView& out);
absl::Status RmsNorm(const KernelContext& ctx, const TensorView& x,
                     const TensorView& residual, const TensorView& weight,
                     float eps, const TensorView& out);

// rope_cpu.cc
absl::Status ApplyRotary(const KernelContext& ctx, const TensorView& q,
                         const TensorView& k, const TensorView& cos_sin,
                         int head_dim, RopeStyle style);

// attention_cpu.cc
absl::Status VarlenAttention(const KernelContext& ctx, const TensorView& q,
                             const TensorView& k, const TensorView& v,
                             const TensorView& cu_seqlens,
                             const AttentionParams& params,
                             const TensorView& out);
absl::Status ReshapeAndCache(const KernelContext& ctx, const TensorView& k,
                             const TensorView& v,
                             const TensorView& slot_mapping,
                             const TensorView& k_cache,
                             const TensorView& v_cache);
absl::Status PagedAttention(const KernelContext& ctx, const TensorView& q,
                            const TensorView& k_cache,
                            const TensorView& v_cache,
                            const PagedAttentionMetadata& metadata,
                            const AttentionParams& params,
                            const TensorView& out);

}  // namespace cpu
}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_KERNELS_H_
