// Workspace: the grow-only activation arena of one model runner. Each slot is
// one device buffer that is enlarged when a step needs more and otherwise
// reused, so steady-state steps allocate nothing.
// Not thread-safe; owned by one runner and used by one step at a time.
#ifndef INFERD_RUNTIME_MODEL_WORKSPACE_H_
#define INFERD_RUNTIME_MODEL_WORKSPACE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "device/device.h"
#include "device/tensor.h"

namespace inferd {

// Buffers of one forward pass. A view obtained for a slot stays valid until
// the next Get() of the same slot (which may grow and move it).
enum class WsSlot : int {
  kHidden,    // [T, H] running hidden states
  kResidual,  // [T, H] residual stream (pre-norm decoders)
  kQkv,       // [T, q + 2 kv] fused projections
  kAttnOut,   // [T, heads * head_dim]
  kProj,      // [T, H] output projections, embedding scratch
  kFfnA,      // [T, I] MLP intermediate (gate / GELU input)
  kFfnB,      // [T, I] MLP up projection ([T, 2I] gate|up when fused)
  kGather,    // [S, H] selected rows (last tokens, first tokens)
  kHeadTmp,   // [S, H] classifier intermediate
  kHeadOut,   // [S, V or labels] head outputs
  kCount,
};

class Workspace {
 public:
  // `device` must outlive the workspace.
  explicit Workspace(Device* device);

  // A contiguous [rows, cols] view of `dtype` in `slot`, growing the slot's
  // buffer when it is too small (by at least 1.25x, to amortize growth).
  absl::StatusOr<TensorView> Get(WsSlot slot, int64_t rows, int64_t cols,
                                 DType dtype = DType::kF32);

  // Bytes currently held by all slots.
  int64_t bytes_allocated() const;

 private:
  Device* device_;
  std::vector<DeviceBuffer> buffers_;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_WORKSPACE_H_
