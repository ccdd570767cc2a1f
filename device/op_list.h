// The device ops, each declared once. A line X(member, Kernel, Return,
// (params)) stands for the kernel
//   Return Kernel(const KernelContext& ctx, params)
// and generates its OpTable member `member` (device/op_table.h), its
// declaration in each device's kernel namespace (cpu:: in
// device/cpu/kernels.h, ref:: in device/ref/ref_ops.cc), its entry in the
// tables filled from these lists (CpuOpTable, ReferenceOpTable: a missing
// kernel fails the build) and its agreement test in
// tests/device/op_table_test.cc (which does not compile without a case for
// it). Macros only; no state.
//
// Adding an op:
//   1. one line here: INFERD_OPS, or INFERD_OPTIONAL_OPS when a device may
//      leave it out (its table entry then stays nullptr);
//   2. its kernel per device: ref::Kernel in device/ref/ref_ops.cc,
//      cpu::Kernel in a device/cpu/*_cpu.cc file;
//   3. its public entry point in device/ops.h, with the shape checks and
//      INFERD_DISPATCH(member, ...) in device/ops.cc;
//   4. its case in tests/device/op_table_test.cc.
//
// Return must not contain a top-level comma (a macro argument); params
// are parenthesized. Kernels may assume ops.cc validated the arguments
// (device/op_table.h).
#ifndef INFERD_DEVICE_OP_LIST_H_
#define INFERD_DEVICE_OP_LIST_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device/device.h"
#include "device/ops.h"
#include "device/tensor.h"

// clang-format off
#define INFERD_OPS(X)                                                        \
  X(linear, Linear, absl::Status,                                            \
    (const TensorView& x, const TensorView& w, const TensorView& bias,       \
     const TensorView& y))                                                   \
  X(matmul, MatMul, absl::Status,                                            \
    (const TensorView& a, const TensorView& b, bool transpose_b,             \
     const TensorView& c))                                                   \
  X(embedding, Embedding, absl::Status,                                      \
    (const TensorView& table, const TensorView& ids, const TensorView& out)) \
  X(mean_pool, MeanPool, absl::Status,                                       \
    (const TensorView& x, const TensorView& starts, const TensorView& ends,  \
     const TensorView& out))                                                 \
  X(l2_normalize, L2Normalize, absl::Status,                                 \
    (const TensorView& x, const TensorView& out))                            \
  X(scores, Scores, absl::Status,                                            \
    (ScoreMode mode, const TensorView& x, const TensorView& out))            \
  X(convert, Convert, absl::Status,                                          \
    (const TensorView& src, const TensorView& dst))                          \
  X(add, Add, absl::Status,                                                  \
    (const TensorView& a, const TensorView& b, const TensorView& out))       \
  X(activate, Activate, absl::Status,                                        \
    (Activation act, const TensorView& x, const TensorView& out))            \
  X(gated_activate, GatedActivate, absl::Status,                             \
    (Activation act, const TensorView& gate, const TensorView& up,           \
     const TensorView& out))                                                 \
  X(softmax, Softmax, absl::Status,                                          \
    (const TensorView& x, const TensorView& out))                            \
  /* residual may be empty (plain norm); bias may be empty. */               \
  X(layer_norm, LayerNorm, absl::Status,                                     \
    (const TensorView& x, const TensorView& residual,                        \
     const TensorView& weight, const TensorView& bias, float eps,            \
     const TensorView& out))                                                 \
  X(rms_norm, RmsNorm, absl::Status,                                         \
    (const TensorView& x, const TensorView& residual,                        \
     const TensorView& weight, float eps, const TensorView& out))            \
  X(apply_rotary, ApplyRotary, absl::Status,                                 \
    (const TensorView& q, const TensorView& k, const TensorView& cos_sin,    \
     int head_dim, RopeStyle style))                                         \
  /* params.scale is resolved (> 0). */                                      \
  X(varlen_attention, VarlenAttention, absl::Status,                         \
    (const TensorView& q, const TensorView& k, const TensorView& v,          \
     const TensorView& cu_seqlens, const AttentionParams& params,            \
     const TensorView& out))                                                 \
  X(reshape_and_cache, ReshapeAndCache, absl::Status,                        \
    (const TensorView& k, const TensorView& v,                               \
     const TensorView& slot_mapping, const TensorView& k_cache,              \
     const TensorView& v_cache))                                             \
  /* params.scale is resolved (> 0). */                                      \
  X(paged_attention, PagedAttention, absl::Status,                           \
    (const TensorView& q, const TensorView& k_cache,                         \
     const TensorView& v_cache, const PagedAttentionMetadata& metadata,      \
     const AttentionParams& params, const TensorView& out))

// Ops a device may leave out (nullptr in its table; ops.cc says what that
// means for each).
#define INFERD_OPTIONAL_OPS(X)                                               \
  /* w in the layout the device's Linear reads without repacking           \
     (PackLinearWeight); left out: weights are never packed. */              \
  X(pack_linear, PackLinear, absl::StatusOr<DeviceBuffer>,                   \
    (const TensorView& w))
// clang-format on

// (a, b) -> (const KernelContext& ctx, a, b): the parameters of every kernel.
#define INFERD_KERNEL_PARAMS(...) (const KernelContext& ctx, __VA_ARGS__)

// For the lists above: declares the kernel in the enclosing namespace.
#define INFERD_DECLARE_KERNEL(member, Kernel, Return, params) \
  Return Kernel INFERD_KERNEL_PARAMS params;

#endif  // INFERD_DEVICE_OP_LIST_H_
