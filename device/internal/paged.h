// Validation of paged-attention metadata shared by reference and optimized
// kernels (block ids, lengths). Header for device/ internals only.
#ifndef INFERD_DEVICE_INTERNAL_PAGED_H_
#define INFERD_DEVICE_INTERNAL_PAGED_H_

#include "absl/status/status.h"
#include "device/ops.h"

namespace inferd {

// OK when seq `s` of `md` is consistent with q and the cache geometry.
absl::Status ValidatePagedSequence(const TensorView& q,
                                   const TensorView& k_cache,
                                   const PagedAttentionMetadata& md,
                                   int64_t s);

}  // namespace inferd

#endif  // INFERD_DEVICE_INTERNAL_PAGED_H_
