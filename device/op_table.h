// OpTable: the per-device kernel entry points behind device/ops.h. ops.cc
// validates arguments and resolves defaults before calling a kernel, so
// kernels may assume well-formed shapes/dtypes (they still validate data that
// lives in tensors, such as ids and block tables). Fused layouts reach the
// kernels as strided views (e.g. [gate|up] becomes two views). Tables are
// immutable; kernels are thread-safe.
#ifndef INFERD_DEVICE_OP_TABLE_H_
#define INFERD_DEVICE_OP_TABLE_H_

#include "absl/status/status.h"
#include "device/device.h"
#include "device/ops.h"
#include "device/tensor.h"

namespace inferd {

class ThreadPool;

struct KernelContext {
  Device* device = nullptr;
  ThreadPool* pool = nullptr;  // nullptr: run serially on the caller
};

struct OpTable {
  absl::Status (*linear)(const KernelContext&, const TensorView& x,
                         const TensorView& w, const TensorView& bias,
                         const TensorView& y) = nullptr;
  // Optional (nullptr: weights are never packed).
  absl::StatusOr<DeviceBuffer> (*pack_linear)(const KernelContext&,
                                              const TensorView& w) = nullptr;
  absl::Status (*matmul)(const KernelContext&, const TensorView& a,
                         const TensorView& b, bool transpose_b,
                         const TensorView& c) = nullptr;
  absl::Status (*embedding)(const KernelContext&, const TensorView& table,
                            const TensorView& ids,
                            const TensorView& out) = nullptr;
  absl::Status (*convert)(const KernelContext&, const TensorView& src,
                          const TensorView& dst) = nullptr;
  absl::Status (*add)(const KernelContext&, const TensorView& a,
                      const TensorView& b, const TensorView& out) = nullptr;
  absl::Status (*activate)(const KernelContext&, Activation act,
                           const TensorView& x,
                           const TensorView& out) = nullptr;
  absl::Status (*gated_activate)(const KernelContext&, Activation act,
                                 const TensorView& gate, const TensorView& up,
                                 const TensorView& out) = nullptr;
  absl::Status (*softmax)(const KernelContext&, const TensorView& x,
                          const TensorView& out) = nullptr;
  // residual may be empty (plain norm); bias may be empty.
  absl::Status (*layer_norm)(const KernelContext&, const TensorView& x,
                             const TensorView& residual,
                             const TensorView& weight, const TensorView& bias,
                             float eps, const TensorView& out) = nullptr;
  absl::Status (*rms_norm)(const KernelContext&, const TensorView& x,
                           const TensorView& residual,
                           const TensorView& weight, float eps,
                           const TensorView& out) = nullptr;
  absl::Status (*apply_rotary)(const KernelContext&, const TensorView& q,
                               const TensorView& k, const TensorView& cos_sin,
                               int head_dim, RopeStyle style) = nullptr;
  // params.scale is resolved (> 0).
  absl::Status (*varlen_attention)(const KernelContext&, const TensorView& q,
                                   const TensorView& k, const TensorView& v,
                                   const TensorView& cu_seqlens,
                                   const AttentionParams& params,
                                   const TensorView& out) = nullptr;
  absl::Status (*reshape_and_cache)(const KernelContext&, const TensorView& k,
                                    const TensorView& v,
                                    const TensorView& slot_mapping,
                                    const TensorView& k_cache,
                                    const TensorView& v_cache) = nullptr;
  absl::Status (*paged_attention)(const KernelContext&, const TensorView& q,
                                  const TensorView& k_cache,
                                  const TensorView& v_cache,
                                  const PagedAttentionMetadata& metadata,
                                  const AttentionParams& params,
                                  const TensorView& out) = nullptr;
};

// The plain-loop kernels (device/ref/), complete; host memory only.
const OpTable& ReferenceOpTable();

}  // namespace inferd

#endif  // INFERD_DEVICE_OP_TABLE_H_
