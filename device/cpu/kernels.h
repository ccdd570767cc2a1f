// Optimized CPU kernels behind CpuOpTable(): one per op of device/op_list.h
// (linear_cpu.cc: Linear, PackLinear, MatMul; elementwise_cpu.cc:
// Embedding, Convert, Add, Activate, GatedActivate, Softmax; norm_cpu.cc:
// LayerNorm, RmsNorm; rope_cpu.cc: ApplyRotary; attention_cpu.cc:
// VarlenAttention, ReshapeAndCache, PagedAttention) and the helpers they
// share. Same contracts as the OpTable entries; thread-safe.
#ifndef INFERD_DEVICE_CPU_KERNELS_H_
#define INFERD_DEVICE_CPU_KERNELS_H_

#include "device/cpu/gemm.h"
#include "device/op_list.h"
#include "device/op_table.h"

namespace inferd {
namespace cpu {

INFERD_OPS(INFERD_DECLARE_KERNEL)
// PackLinear: a copy of w in the panel layout of the GEMM this CPU runs
// (see PackLinearWeight in device/ops.h); empty when there is none.
INFERD_OPTIONAL_OPS(INFERD_DECLARE_KERNEL)

// GEMM for the active ISA.
void RunGemm(ThreadPool* pool, const GemmArgs& args);

// The panels of w.packed when it holds `format` for w's dtype and shape
// (from PackLinear), else nullptr.
const void* PackedPanels(const TensorView& w, uint32_t format);

// quant_linear_cpu.cc: Linear with F16 or block-quantized weights.
absl::Status QuantLinear(const KernelContext& ctx, const TensorView& x,
                         const TensorView& w, const TensorView& bias,
                         const TensorView& y);

}  // namespace cpu
}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_KERNELS_H_
