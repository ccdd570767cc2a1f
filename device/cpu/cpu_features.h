// Runtime CPU feature detection and an ISA cap that selects which kernel
// variants the cpu device may use. Thread-safe (the cap is an atomic).
#ifndef INFERD_DEVICE_CPU_CPU_FEATURES_H_
#define INFERD_DEVICE_CPU_CPU_FEATURES_H_

#include "absl/strings/string_view.h"

namespace inferd {

// Ordered: each level implies the ones below it.
enum class CpuIsa : int {
  kScalar = 0,      // portable C++ only
  kAvx2 = 1,        // AVX2 + FMA + F16C
  kAvx512 = 2,      // AVX-512 F/BW/VL/DQ
  kAvx512Bf16 = 3,  // + AVX512_BF16 (vdpbf16ps)
};

absl::string_view CpuIsaName(CpuIsa isa);

// What this CPU supports.
CpuIsa DetectedCpuIsa();

// Limits kernel selection to at most `cap` (tests use it to cover the AVX2
// and scalar fallbacks). The initial cap comes from the environment variable
// INFERD_CPU_ISA = scalar | avx2 | avx512 | avx512_bf16, else no cap.
void SetCpuIsaCap(CpuIsa cap);
CpuIsa CpuIsaCap();

// min(DetectedCpuIsa(), CpuIsaCap()): what kernels use right now.
CpuIsa ActiveCpuIsa();

}  // namespace inferd

#endif  // INFERD_DEVICE_CPU_CPU_FEATURES_H_
